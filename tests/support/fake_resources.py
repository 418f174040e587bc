"""The fake upstream's Message Batches, Models and Files APIs, answering as the real API does.

Batches end the moment they are created (so a test can fetch results at
once), and their `results_url` names the fake's own host, as the real API's
names api.anthropic.com: a gateway that failed to rewrite it would send the
SDK straight to the upstream. A test sets `results[batch_id]` to choose a
batch's results file (entries, or a callable yielding raw chunks for files
too large to build in memory); by default every request succeeds with an echo.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MODELS = [
    {
        "type": "model",
        "id": "claude-sonnet-4-6",
        "display_name": "Claude Sonnet 4.6",
        "created_at": "2026-02-17T00:00:00Z",
    },
    {
        "type": "model",
        "id": "claude-haiku-4-5",
        "display_name": "Claude Haiku 4.5",
        "created_at": "2025-10-15T00:00:00Z",
    },
]
CREATED_AT = "2026-12-01T08:00:00Z"
RAW_CONTENT = b"%PDF-1.4 raw file bytes \x00\x01\x02"

Entry = dict[str, Any]
Chunks = Callable[[], Iterator[bytes]]


@dataclass
class Answer:
    """What the fake sends: a JSON body, or raw chunks (a results file, a file's content)."""

    status: int = 200
    body: Any = None
    chunks: Chunks | None = None
    content_type: str = "application/json"


def not_found(what: str) -> Answer:
    return Answer(
        404,
        {
            "type": "error",
            "error": {"type": "not_found_error", "message": f"{what} not found"},
            "request_id": "req_fake_404",
        },
    )


def succeeded(custom_id: str, message: dict[str, Any]) -> Entry:
    return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}


def errored(custom_id: str, message: str = "model: claude-instant-1.2") -> Entry:
    return {
        "custom_id": custom_id,
        "result": {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {"type": "not_found_error", "message": message},
                "request_id": "req_fake_batch_entry",
            },
        },
    }


def lines(entries: list[Entry]) -> Chunks:
    """A results file of `entries`, one JSON line each, sent in one chunk per line."""

    def produce() -> Iterator[bytes]:
        for entry in entries:
            yield json.dumps(entry).encode() + b"\n"

    return produce


@dataclass
class FakeResources:
    """Batches, Models and Files, thread-safe; `reset()` between tests."""

    results: dict[str, list[Entry] | Chunks] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _created: int = 0

    def reset(self) -> None:
        with self._lock:
            self.results.clear()
            self.batches.clear()
            self._created = 0

    def answer(
        self, method: str, path: str, body: bytes, host: str, echo: Callable[[Any], Any]
    ) -> Answer | None:
        """The answer for a batch, model or file route; None for any other path."""
        if path.startswith("/v1/messages/batches"):
            with self._lock:
                return self._batches(method, path, body, f"http://{host}", echo)
        if path == "/v1/models" and method == "GET":
            return Answer(
                body={
                    "data": MODELS,
                    "has_more": False,
                    "first_id": MODELS[0]["id"],
                    "last_id": MODELS[-1]["id"],
                }
            )
        if path.startswith("/v1/models/") and method == "GET":
            model_id = path.removeprefix("/v1/models/")
            found = [model for model in MODELS if model["id"] == model_id]
            return Answer(body=found[0]) if found else not_found(f"model {model_id}")
        if path.startswith("/v1/files"):
            return _files(method, path, body)
        return None

    def _batches(
        self, method: str, path: str, body: bytes, origin: str, echo: Callable[[Any], Any]
    ) -> Answer:
        if path == "/v1/messages/batches":
            if method == "POST":
                return Answer(body=self._create(json.loads(body), origin, echo))
            listed = list(reversed(self.batches.values()))
            return Answer(
                body={
                    "data": listed,
                    "has_more": False,
                    "first_id": listed[0]["id"] if listed else None,
                    "last_id": listed[-1]["id"] if listed else None,
                }
            )
        match = re.fullmatch(r"/v1/messages/batches/([^/]+)(/cancel|/results)?", path)
        if match is None or match[1] not in self.batches:
            return not_found("message batch")
        batch_id, action = match[1], match[2]
        batch = self.batches[batch_id]
        if action == "/results":
            results = self.results[batch_id]
            chunks = results if callable(results) else lines(results)
            return Answer(chunks=chunks, content_type="application/binary")
        if action == "/cancel":
            batch["cancel_initiated_at"] = CREATED_AT
            return Answer(body=batch)
        if method == "DELETE":
            del self.batches[batch_id]
            return Answer(body={"id": batch_id, "type": "message_batch_deleted"})
        return Answer(body=batch)

    def _create(
        self, request: dict[str, Any], origin: str, echo: Callable[[Any], Any]
    ) -> dict[str, Any]:
        self._created += 1
        batch_id = f"msgbatch_fake_{self._created:04d}"
        entries = request["requests"]
        self.results.setdefault(
            batch_id, [succeeded(entry["custom_id"], echo(entry["params"])) for entry in entries]
        )
        batch = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended",
            "request_counts": {
                "processing": 0,
                "succeeded": len(entries),
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "ended_at": CREATED_AT,
            "created_at": CREATED_AT,
            "expires_at": CREATED_AT,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{origin}/v1/messages/batches/{batch_id}/results",
        }
        self.batches[batch_id] = batch
        return batch


def _files(method: str, path: str, body: bytes) -> Answer:
    file_object = {
        "id": "file_fake_0001",
        "type": "file",
        "filename": "report.pdf",
        "mime_type": "application/pdf",
        "size_bytes": len(body),
        "created_at": CREATED_AT,
        "downloadable": True,
    }
    if path == "/v1/files":
        if method == "POST":
            return Answer(body=file_object)
        return Answer(
            body={"data": [file_object], "has_more": False, "first_id": None, "last_id": None}
        )
    if path.endswith("/content"):
        return Answer(chunks=lambda: iter([RAW_CONTENT]), content_type="application/octet-stream")
    if method == "DELETE":
        return Answer(body={"id": "file_fake_0001", "type": "file_deleted"})
    return Answer(body=file_object)
