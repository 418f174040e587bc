"""A streamed answer as the client received it, rebuilt into one message.

The record of a streaming call holds the message the client's SDK assembled,
not the upstream's: it is built from the very bytes the relay wrote to the
client (after the stream policies), in the SDKs' way: the snapshot of
`message_start`, blocks appended in arrival order and addressed by `index`,
text, thinking, signatures and citations appended, partial tool input parsed
at the block's stop, `message_delta`'s stop reason and cumulative usage merged.
A stream that ended with an `error` event keeps it beside what came before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from gateway_policies.runtime.sse import SSEDecoder

_APPENDED = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
}
_TOOL_INPUT_KEY = "__partial_json"


def rebuilt(chunks: Iterable[bytes]) -> dict[str, Any]:
    """The message the SSE bytes `chunks` spell, as the SDKs would assemble it."""
    decoder = SSEDecoder()
    message: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    for chunk in chunks:
        for event in decoder.feed(chunk):
            _apply(event.payload, message, blocks)
    for event in decoder.flush():
        _apply(event.payload, message, blocks)
    for block in blocks:
        partial = block.pop(_TOOL_INPUT_KEY, None)
        if partial is not None:
            try:
                block["input"] = json.loads(partial) if partial else {}
            except ValueError:
                block["input"] = partial
    if message or blocks:
        message["content"] = blocks
    return message


def _apply(
    data: dict[str, Any] | None, message: dict[str, Any], blocks: list[dict[str, Any]]
) -> None:
    if data is None:
        return
    kind = data.get("type")
    if kind == "message_start" and isinstance(data.get("message"), dict):
        message.update(data["message"])
    elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
        block = dict(data["content_block"])
        if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
            block[_TOOL_INPUT_KEY] = ""
        blocks.append(block)
    elif kind == "content_block_delta":
        _delta(data, blocks)
    elif kind == "message_delta":
        delta = data.get("delta")
        if isinstance(delta, dict):
            message.update(delta)
        if isinstance(data.get("usage"), dict):
            message["usage"] = {**message.get("usage", {}), **data["usage"]}
    elif kind == "error":
        message["error"] = data.get("error")


def _delta(data: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
    index, delta = data.get("index"), data.get("delta")
    if not isinstance(index, int) or not 0 <= index < len(blocks) or not isinstance(delta, dict):
        return
    block = blocks[index]
    kind = delta.get("type")
    if kind in _APPENDED:
        key = _APPENDED[kind]
        block[key] = block.get(key, "") + str(delta.get(key, ""))
    elif kind == "input_json_delta":
        block[_TOOL_INPUT_KEY] = block.get(_TOOL_INPUT_KEY, "") + str(delta.get("partial_json", ""))
    elif kind == "citations_delta":
        block.setdefault("citations", []).append(delta.get("citation"))
