"""Message Batches as the simulator answers them: create, retrieve, list, results, cancel, delete.

A batch is `in_progress` for PROCESSING_SECONDS after its creation, then
`ended`; a cancel makes it `canceling` for CANCELING_SECONDS, then `ended`
with every entry canceled. Time is the simulator's clock (tests move it).
Each entry is answered as POST /v1/messages would answer its `params`: the
same simulated reply (`succeeded`), or the same refusal (`errored`). Once a
batch has ended, its `results_url` names the simulator's results route; the
gateway points it at its own (routes/batches.py), as it does the API's.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .simulated_errors import error, error_document, refusal
from .simulated_pages import PageRefused, page
from .simulated_reply import reply_message

Clock = Callable[[], float]
"""Seconds since the epoch (time.time, or a test's clock)."""

# Short, so a local run's batch ends while its client polls; the API takes minutes to hours.
PROCESSING_SECONDS = 2.0
CANCELING_SECONDS = 1.0
EXPIRES_AFTER_SECONDS = 24 * 3600
MAX_REQUESTS = 100_000
_CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
RESULTS_CONTENT_TYPE = "application/binary"


def _stamp(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _result(custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
    refused = refusal(params, count_tokens=False)
    if refused is not None:
        outcome = {"type": "errored", "error": error_document(*refused)}
    else:
        outcome = {"type": "succeeded", "message": reply_message(params, params["model"])}
    return {"custom_id": custom_id, "result": outcome}


@dataclass
class SimulatedBatch:
    id: str
    created: float
    requests: list[tuple[str, dict[str, Any]]]
    origin: str
    cancel_initiated: float | None = None
    _results: list[dict[str, Any]] | None = field(default=None, repr=False)

    def ended_at(self) -> float:
        if self.cancel_initiated is not None:
            return self.cancel_initiated + CANCELING_SECONDS
        return self.created + PROCESSING_SECONDS

    def status(self, now: float) -> str:
        if now >= self.ended_at():
            return "ended"
        return "in_progress" if self.cancel_initiated is None else "canceling"

    def results(self) -> list[dict[str, Any]]:
        """Each entry's result, made once (so every read of the file is the same file)."""
        if self._results is None:
            if self.cancel_initiated is not None:
                canceled = {"type": "canceled"}
                self._results = [{"custom_id": c, "result": canceled} for c, _ in self.requests]
            else:
                self._results = [_result(custom_id, params) for custom_id, params in self.requests]
        return self._results

    def document(self, now: float) -> dict[str, Any]:
        status = self.status(now)
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if status == "ended":
            for entry in self.results():
                counts[entry["result"]["type"]] += 1
        else:
            counts["processing"] = len(self.requests)
        ended = status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": _stamp(self.created),
            "expires_at": _stamp(self.created + EXPIRES_AFTER_SECONDS),
            "ended_at": _stamp(self.ended_at()) if ended else None,
            "cancel_initiated_at": _stamp(self.cancel_initiated),
            "archived_at": None,
            "results_url": (
                f"{self.origin}/v1/messages/batches/{self.id}/results" if ended else None
            ),
        }


class BatchRefused(ValueError):
    """A batch the API refuses with a 400 `invalid_request_error`."""


def _requests(body: Any) -> list[tuple[str, dict[str, Any]]]:
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        raise BatchRefused("requests: must be a non-empty list")
    if len(requests) > MAX_REQUESTS:
        raise BatchRefused(f"requests: at most {MAX_REQUESTS} requests per batch")
    entries: list[tuple[str, dict[str, Any]]] = []
    for index, entry in enumerate(requests):
        custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
        params = entry.get("params") if isinstance(entry, dict) else None
        if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
            raise BatchRefused(f"requests.{index}.custom_id: 1 to 64 of [A-Za-z0-9_-]")
        if not isinstance(params, dict):
            raise BatchRefused(f"requests.{index}.params: must be an object")
        entries.append((custom_id, params))
    custom_ids = [custom_id for custom_id, _ in entries]
    if len(set(custom_ids)) != len(custom_ids):
        raise BatchRefused("requests: custom_id must be unique within a batch")
    return entries


class SimulatedBatches:
    """The simulator's batches, newest first; one instance per simulator."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._batches: dict[str, SimulatedBatch] = {}

    def _found(self, request: Request) -> SimulatedBatch | Response:
        batch_id = request.path_params["message_batch_id"]
        batch = self._batches.get(batch_id)
        return error(404, f"message batch {batch_id}") if batch is None else batch

    async def create(self, request: Request) -> Response:
        try:
            entries = _requests(json.loads(await request.body()))
        except ValueError as refused:
            message = str(refused) if isinstance(refused, BatchRefused) else "Invalid JSON"
            return error(400, message)
        origin = str(request.base_url).rstrip("/")
        batch = SimulatedBatch(
            f"msgbatch_sim_{uuid.uuid4().hex[:24]}", self._clock(), entries, origin
        )
        self._batches = {batch.id: batch, **self._batches}
        return JSONResponse(batch.document(self._clock()))

    async def retrieve(self, request: Request) -> Response:
        batch = self._found(request)
        return batch if isinstance(batch, Response) else JSONResponse(batch.document(self._clock()))

    async def list(self, request: Request) -> Response:
        now = self._clock()
        documents = [batch.document(now) for batch in self._batches.values()]
        try:
            return JSONResponse(page(documents, request.query_params))
        except PageRefused as refused:
            return error(400, str(refused))

    async def cancel(self, request: Request) -> Response:
        batch = self._found(request)
        if isinstance(batch, Response):
            return batch
        now = self._clock()
        if batch.status(now) == "in_progress":
            batch.cancel_initiated = now
        return JSONResponse(batch.document(now))

    async def delete(self, request: Request) -> Response:
        batch = self._found(request)
        if isinstance(batch, Response):
            return batch
        if batch.status(self._clock()) != "ended":
            return error(400, f"message batch {batch.id} is still processing: cancel it first")
        del self._batches[batch.id]
        return JSONResponse({"id": batch.id, "type": "message_batch_deleted"})

    async def results(self, request: Request) -> Response:
        batch = self._found(request)
        if isinstance(batch, Response):
            return batch
        status = batch.status(self._clock())
        if status != "ended":
            return error(400, f"message batch {batch.id} has no results yet: it is {status}")
        lines = "".join(json.dumps(entry) + "\n" for entry in batch.results())
        return Response(lines, media_type=RESULTS_CONTENT_TYPE)
