"""Test helpers for policy authors: run a policy as the gateway would, without a gateway.

Each `run_*` helper puts the policies in a real PolicyChain (so exceptions are
wrapped exactly as in production) and runs it on a fresh event loop, which
makes plain synchronous pytest tests possible:

    from gateway_policies.testing import run_request, run_stream, stream, text_block

    def test_tags() -> None:
        out = run_request(MyPolicy({"tag": "x"}), {"model": "m", "messages": [...]})
        ...

`run_stream` sends events through the real SSE wire format both ways, as
the gateway does: encoded as the upstream sends them, decoded as the relay
reads them, and the chain's output encoded by the relay's encoder and decoded
as a client would. What a test sees is what a client would receive.

The builders (`stream`, `text_block`, `tool_use_block`, ...) make Messages
SSE events as the API sends them, and `assemble` rebuilds the final message
from events while checking what the SDK's accumulator relies on: one block
open at a time and contiguous indices.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from .base import JSONObject, Policy, PolicyContext, StreamEvent
from .runtime.chain import PolicyChain
from .runtime.sse import SSEDecoder, encode_many

MODEL = "claude-sonnet-4-6"

Policies = Policy[Any] | Sequence[Policy[Any]]


def context(*, stream: bool = False, endpoint: str = "messages") -> PolicyContext:
    return PolicyContext(endpoint=endpoint, stream=stream, call_id="test-call")


def _chain(policies: Policies) -> PolicyChain:
    return PolicyChain([policies] if isinstance(policies, Policy) else policies)


def run_request(
    policies: Policies,
    request: JSONObject,
    *,
    endpoint: str = "messages",
    ctx: PolicyContext | None = None,
) -> JSONObject:
    """The request as the chain sends it upstream; `request` itself is left untouched.

    Pass `ctx` (from `context()`) to read what the policies recorded, `ctx.actions`;
    the same goes for `run_response` and `run_stream`.
    """
    changed = copy.deepcopy(request)
    if ctx is None:
        ctx = context(stream=request.get("stream") is True, endpoint=endpoint)
    asyncio.run(_chain(policies).apply_request(changed, ctx))
    return changed


def run_response(
    policies: Policies, response: JSONObject, *, ctx: PolicyContext | None = None
) -> JSONObject:
    """The non-streaming response as the client receives it; `response` is left untouched."""
    changed = copy.deepcopy(response)
    asyncio.run(_chain(policies).apply_response(changed, ctx or context()))
    return changed


def decode(wire: bytes) -> list[StreamEvent]:
    """The events a client reads from `wire`, the SSE bytes of a whole stream."""
    decoder = SSEDecoder()
    return [*decoder.feed(wire), *decoder.flush()]


def run_stream(
    policies: Policies, events: Iterable[StreamEvent], *, ctx: PolicyContext | None = None
) -> list[StreamEvent]:
    """The events the client receives for `events` from upstream, end of stream included.

    Encoded the moment the chain hands them on, as the relay does, so an event
    a policy changes after returning it is seen here exactly as late as a
    client would see it: not at all.
    """
    chain = _chain(policies)
    if ctx is None:
        ctx = context(stream=True)
    running = ctx

    async def run() -> bytes:
        sent: list[bytes] = []
        for event in decode(encode_many(list(events))):
            sent.append(encode_many(await chain.apply_stream_event(event, running)))
        sent.append(encode_many(await chain.apply_stream_end(running)))
        return b"".join(sent)

    return decode(asyncio.run(run()))


def event(payload: JSONObject) -> StreamEvent:
    """An SSE event named, as the API names them, after its payload's type."""
    return StreamEvent.from_json(str(payload["type"]), payload)


def message_start(model: str = MODEL) -> StreamEvent:
    return event(
        {
            "type": "message_start",
            "message": {
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        }
    )


def ping() -> StreamEvent:
    return event({"type": "ping"})


def _block(index: int, block: JSONObject, deltas: Iterable[JSONObject]) -> list[StreamEvent]:
    return [
        event({"type": "content_block_start", "index": index, "content_block": block}),
        *(event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas),
        event({"type": "content_block_stop", "index": index}),
    ]


def text_block(index: int, *parts: str) -> list[StreamEvent]:
    return _block(
        index, {"type": "text", "text": ""}, ({"type": "text_delta", "text": p} for p in parts)
    )


def _call_block(
    index: int, block: JSONObject, tool_input: JSONObject, chunks: int
) -> list[StreamEvent]:
    raw = json.dumps(tool_input)
    size = max(1, -(-len(raw) // chunks))
    return _block(
        index,
        block,
        (
            {"type": "input_json_delta", "partial_json": raw[i : i + size]}
            for i in range(0, len(raw), size)
        ),
    )


def tool_use_block(
    index: int, name: str, tool_input: JSONObject, *, chunks: int = 3
) -> list[StreamEvent]:
    """A tool_use block whose input JSON arrives split into `chunks` partial deltas."""
    block = {"type": "tool_use", "id": f"toolu_{index:02d}_{name}", "name": name, "input": {}}
    return _call_block(index, block, tool_input, chunks)


def server_tool_use_block(
    index: int, name: str, tool_input: JSONObject, *, chunks: int = 3
) -> list[StreamEvent]:
    """A call the API made itself to a server tool (`web_search`, ...), id `srvtoolu_<index>`."""
    block = {"type": "server_tool_use", "id": f"srvtoolu_{index:02d}", "name": name, "input": {}}
    return _call_block(index, block, tool_input, chunks)


def mcp_tool_use_block(
    index: int, name: str, server: str, tool_input: JSONObject, *, chunks: int = 3
) -> list[StreamEvent]:
    """A call the API made itself to an MCP server's tool, id `mcptoolu_<index>`."""
    block = {
        "type": "mcp_tool_use",
        "id": f"mcptoolu_{index:02d}",
        "name": name,
        "server_name": server,
        "input": {},
    }
    return _call_block(index, block, tool_input, chunks)


def tool_result_block(
    index: int, block_type: str, tool_use_id: str, content: Any
) -> list[StreamEvent]:
    """The result block of a call the API made itself (`web_search_tool_result`, ...)."""
    return _block(index, {"type": block_type, "tool_use_id": tool_use_id, "content": content}, ())


def message_delta(stop_reason: str = "end_turn") -> StreamEvent:
    return event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
    )


def message_stop() -> StreamEvent:
    return event({"type": "message_stop"})


def stream(
    *blocks: list[StreamEvent], stop_reason: str = "end_turn", model: str = MODEL
) -> list[StreamEvent]:
    """A whole stream: message_start, a ping, the blocks, message_delta, message_stop."""
    return [
        message_start(model),
        ping(),
        *(e for block in blocks for e in block),
        message_delta(stop_reason),
        message_stop(),
    ]


def _fail(problem: str) -> NoReturn:
    # Raised explicitly, not with `assert`: python -O must not turn the check off.
    raise AssertionError(problem)


def assemble(events: Iterable[StreamEvent]) -> JSONObject:
    """The final message that `events` describe; AssertionError where a client would choke."""
    message: JSONObject | None = None
    block: JSONObject | None = None
    partial_json: list[str] = []
    for item in events:
        payload: Any = item.json
        # As the SDKs do: by the data's type, whatever the event's name.
        kind = payload.get("type")
        if kind == "message_start":
            message = copy.deepcopy(payload["message"])
            continue
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop"):
            if kind == "message_delta" and message is not None:
                message.update(payload["delta"])
            continue
        if message is None:
            _fail(f"{kind} before message_start")
        content: list[JSONObject] = message["content"]
        index = payload["index"]
        if kind == "content_block_start":
            if block is not None:
                _fail(f"block {index} starts while another is open")
            if index != len(content):
                _fail(f"block index {index}, expected {len(content)}")
            block, partial_json = copy.deepcopy(payload["content_block"]), []
            continue
        if block is None or index != len(content):
            _fail(f"{kind} for block {index}, which is not open")
        if kind == "content_block_delta":
            delta = payload["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                partial_json.append(delta["partial_json"])
            continue
        if partial_json:
            block["input"] = json.loads("".join(partial_json))
        content.append(block)
        block = None
    if message is None:
        _fail("no message_start")
    if block is not None:
        _fail("the stream ended inside a block")
    return message


def as_pairs(events: Iterable[StreamEvent]) -> list[tuple[str, JSONObject]]:
    """(name, payload) pairs, the shape a scripted fake upstream replays."""
    return [(item.event, item.json) for item in events]
