"""Streams as a hostile upstream frames them, and the raw SSE replies that carry them.

Builders for single events (a block's start, a delta, a call's input partial,
a stop) at any index, valid or not; the two framings that once took a blocked
input past the tool gate to the SDK; a stream holding every kind of block the
API sends; and the fake upstream's reply that sends frames exactly as given.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from gateway_policies import StreamEvent
from gateway_policies.testing import event, message_delta, message_start, message_stop, ping

from .client import HEADERS, policy_chain, request_body
from .fake_upstream import Reply


def frame(event: StreamEvent, name: str | None = None) -> bytes:
    """`event` on the wire under `name` (its own by default); None: with no `event:` line."""
    label = event.event if name is None else name
    head = f"event: {label}\n" if label else ""
    return f"{head}data: {event.data}\n\n".encode()


def wire(*events: StreamEvent) -> list[bytes]:
    return [frame(event) for event in events]


def sse_reply(frames: list[bytes]) -> Reply:
    """A 200 event stream carrying exactly `frames`, then a clean end."""
    return Reply(chunks=lambda: iter(frames), content_type="text/event-stream")


def post_stream(url: str) -> httpx2.Response:
    return httpx2.post(
        f"{url}/v1/messages", json=request_body(stream=True), headers=HEADERS, timeout=10
    )


RM = {"command": "rm -rf /"}
GATE_RM = policy_chain(("block_tool_calls", {"rules": [{"input": "rm -rf"}]}))


def start(index: Any, block: dict[str, Any]) -> StreamEvent:
    return event({"type": "content_block_start", "index": index, "content_block": block})


def call(
    index: Any, tool_input: Any = None, *, kind: str = "tool_use", name: str = "bash"
) -> StreamEvent:
    block = {"type": kind, "id": f"toolu_{index}", "name": name, "input": tool_input or {}}
    return start(index, block)


def delta(index: Any, body: dict[str, Any]) -> StreamEvent:
    return event({"type": "content_block_delta", "index": index, "delta": body})


def partial(index: Any, text: Any) -> StreamEvent:
    return delta(index, {"type": "input_json_delta", "partial_json": text})


def stop(index: Any) -> StreamEvent:
    return event({"type": "content_block_stop", "index": index})


DELTA_AFTER_STOP = [
    message_start(),
    call(0),
    stop(0),
    partial(0, json.dumps(RM)),
    message_delta("tool_use"),
    message_stop(),
]
INPUT_AT_START = [
    message_start(),
    call(0, RM),
    partial(0, ""),
    stop(0),
    message_delta("tool_use"),
    message_stop(),
]
FRAMINGS = pytest.mark.parametrize(
    "events", [DELTA_AFTER_STOP, INPUT_AT_START], ids=["delta-after-stop", "input-at-start"]
)

TEXT = start(0, {"type": "text", "text": ""})
THINKING = start(0, {"type": "thinking", "thinking": "", "signature": ""})
CITATION = {"type": "char_location", "cited_text": "x", "document_index": 0}
GOOD = [
    message_start(),
    ping(),
    THINKING,
    delta(0, {"type": "thinking_delta", "thinking": "let me see"}),
    delta(0, {"type": "signature_delta", "signature": "c2ln"}),
    stop(0),
    start(1, {"type": "redacted_thinking", "data": "b3BhcXVl"}),
    stop(1),
    start(2, {"type": "text", "text": ""}),
    delta(2, {"type": "text_delta", "text": "As the docs say"}),
    delta(2, {"type": "citations_delta", "citation": CITATION}),
    delta(2, {"type": "future_delta", "whatever": [1]}),
    stop(2),
    event({"type": "future_event", "x": 1}),
    call(3, kind="server_tool_use", name="web_search"),
    partial(3, '{"query": '),
    partial(3, '"weather"}'),
    stop(3),
    start(4, {"type": "web_search_tool_result", "tool_use_id": "toolu_3", "content": []}),
    stop(4),
    call(5),
    partial(5, ""),
    partial(5, '{"command": "ls"}'),
    stop(5),
    ping(),
    message_delta("tool_use"),
    message_stop(),
]
