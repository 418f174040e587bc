"""The record of a call, written at its end: after the client's last event, before the
response ends.

A recorded call (its caller's `record` option, records/option.py) carries a
`CallRecording` that notes what the client receives as it goes out: the JSON body
handed to the server, or the SSE bytes the relay wrote (after the response and
stream policies: a blocked tool call is kept as the text that replaced it).
What was sent upstream is the call's `sent`, the body of the attempt that
answered (after the request policies; after a fallback, what it sent), so a
value a policy removed is never seen here, and no header (no key) ever is.

When the client has its last event the response is not yet ended: the route
asks for the write (`Call.end_body`) and ends the response after it. So the
client never waits for the write, and the invocation does not end, and Lambda
cannot freeze the write half done, before the record is stored. The work runs
in the writer's own threads, at the lowest CPU priority, under
`WRITE_TIMEOUT_SECONDS`; whatever goes wrong is the metric RecordFailures and
a WARNING, never a failed call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import anyio

from .. import names
from ..call import Call
from ..observability import metrics
from ..observability.audit import MAX_LOGGED_ACTIONS
from ..observability.logs import logger
from . import answer, layout
from .store import RecordStore

WRITE_TIMEOUT_SECONDS = 5.0
"""The longest a write may hold the end of a response (an S3 that stalls rather than
refuses); the client already has every byte by then."""
WRITERS = 4
"""Records written at once (a stalled store must not queue every later write behind one)."""
WRITER_NICENESS = 19
"""The writer thread's CPU priority (the lowest): cutting a megabyte body into a record must
never take the CPU from the calls being served, nor from a client on the same machine."""
BLOBS_REMEMBERED = 4096
"""System prompts and tool lists this process knows it stored (so it does not put them
again on every call); another environment puts one again, under the same key."""


@dataclass
class CallRecording:
    """What the client received on one recorded call, noted as it went out (call.Recording)."""

    writer: RecordWriter
    json_body: bytes | None = None
    status: int = 0
    chunks: list[bytes] = field(default_factory=list)
    """The SSE bytes of a stream, as written to the client."""
    answered: float | None = None
    """perf_counter() when the client's last byte was handed to the server."""

    def answered_json(self, status: int, body: bytes) -> None:
        self.status, self.json_body = status, body
        self.answered = time.perf_counter()

    def streamed(self, body: bytes) -> None:
        self.chunks.append(body)
        self.answered = time.perf_counter()

    async def store(self, call: Call) -> None:
        await self.writer.write(call, self)


class RecordWriter:
    """Writes recorded calls to one store; one per gateway."""

    def __init__(self, store: RecordStore, timeout: float = WRITE_TIMEOUT_SECONDS) -> None:
        self.store = store
        self.timeout = timeout
        self._stored_blobs: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(
            max_workers=WRITERS, thread_name_prefix="records", initializer=_lowest_priority
        )

    def recording(self) -> CallRecording:
        return CallRecording(self)

    async def write(self, call: Call, recording: CallRecording) -> None:
        """Store the call's record; never raises (a failure is counted and logged)."""
        if call.sent is None or recording.answered is None:
            return
        left = call.seconds_left()
        try:
            with anyio.fail_after(
                self.timeout if left is None else max(0.0, min(left, self.timeout))
            ):
                # On the timeout the call stops waiting; a put under way ends in its thread.
                await asyncio.wrap_future(self._thread.submit(self._store, call, recording))
        except Exception as exc:
            metrics.count(names.METRIC_RECORD_FAILURES)
            logger.warning(
                "call not recorded: the record store failed",
                extra={
                    "error_type": type(exc).__name__,
                    "records": self.store.location,
                },
            )

    def _store(self, call: Call, recording: CallRecording) -> None:
        assert call.sent is not None
        sent = layout.SentRequest.parse(call.sent)
        digests = layout.prefix_digests(sent.messages)
        offset = layout.resumes_at(sent.messages)
        blobs = {
            text: layout.text_digest(text) for text in (sent.system, sent.tools) if text is not None
        }
        for text, digest in blobs.items():
            self._put_blob(call.caller, digest, text)
        record = layout.CallRecord(
            call_id=call.call_id,
            caller=call.caller,
            time=time.time() - (time.perf_counter() - call.started),
            parent=digests[offset],
            digest=digests[-1],
            offset=offset,
            messages=sent.messages[offset:],
            answer=_answer_text(recording),
            params=sent.params,
            system=None if sent.system is None else blobs[sent.system],
            tools=None if sent.tools is None else blobs[sent.tools],
            meta=_meta(call, recording),
        )
        self.store.put(
            layout.call_key(call.caller, record.parent, call.call_id), record.to_text().encode()
        )

    def _put_blob(self, caller: str | None, digest: str, text: str) -> None:
        key = layout.blob_key(caller, digest)
        with self._lock:
            if key in self._stored_blobs:
                self._stored_blobs.move_to_end(key)
                return
        self.store.put(key, text.encode())
        with self._lock:
            self._stored_blobs[key] = None
            while len(self._stored_blobs) > BLOBS_REMEMBERED:
                self._stored_blobs.popitem(last=False)


def _lowest_priority() -> None:
    # Linux gives each thread its own nice value (setpriority on its thread id).
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WRITER_NICENESS)


def _answer_text(recording: CallRecording) -> str:
    if recording.json_body is not None:
        return layout.answer_text(recording.json_body)
    rebuilt = answer.rebuilt(recording.chunks)
    return json.dumps(rebuilt, ensure_ascii=False, separators=(",", ":"))


def _meta(call: Call, recording: CallRecording) -> dict[str, Any]:
    actions = call.policy_actions()
    assert recording.answered is not None
    return {
        "status": recording.status or call.status,
        "stream": call.stream,
        "endpoint": call.endpoint,
        "chain": call.chain,
        "chain_version": call.chain_version,
        "fallback": call.fallback,
        "attempts": call.attempts,
        "upstream_request_id": call.upstream_request_id,
        "trace_id": call.trace_id,
        "policy_actions": [action.as_json() for action in actions[:MAX_LOGGED_ACTIONS]],
        "timings": {
            "answered_ms": round((recording.answered - call.started) * 1000, 2),
        },
    }
