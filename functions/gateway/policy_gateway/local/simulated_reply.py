"""What the built-in upstream simulators answer: one reply per request, whole or as events.

Shared by the Messages API simulator (simulator.py) and the Bedrock one
(bedrock_simulator.py), so a local run shows the same replies to its policies
whichever upstream it simulates.

A request whose last user message starts with `/tool NAME` is answered with a
call to the tool NAME (`stop_reason: "tool_use"`); the rest of that message,
if any, is the call's input as a JSON object:

    /tool bash {"command": "rm -rf /"}

So every tool policy (block_tool_calls, tool_call_judge, a custom
ToolCallGate) can be watched at work without a model that decides to call a
tool. A tool result holding such a line steers the call the same way
(simulated_steering.py), so flow_guard's `provenance` check can be watched
too. Any other message is echoed back as text.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

from ..fallback.repair import may_be_empty
from .simulated_steering import steered_call

TOOL_TRIGGER = "/tool"
_TOOL_CALL = re.compile(rf"\s*{re.escape(TOOL_TRIGGER)}\s+(\S+)\s*(.*)", re.DOTALL)
# How much of a tool call's input JSON each `input_json_delta` carries: small
# enough that a policy sees the input arrive in pieces, as from the real API.
INPUT_JSON_PIECE = 12


class ToolTriggerError(ValueError):
    """The `/tool` line's input is not a JSON object."""


def _has_empty_text_block(body: dict[str, Any]) -> bool:
    holders = [body.get("system")] + [
        message.get("content") for message in body["messages"] if isinstance(message, dict)
    ]
    return any(
        isinstance(block, dict) and block.get("type") == "text" and not block.get("text")
        for holder in holders
        if isinstance(holder, list)
        for block in holder
    )


def _empty_message(messages: list[Any]) -> int | None:
    """The first message whose empty content the API refuses."""
    for index, message in enumerate(messages):
        if (
            isinstance(message, dict)
            and message.get("content") in ("", [])
            and not may_be_empty(messages, index)
        ):
            return index
    return None


def request_problem(body: Any, count_tokens: bool) -> str | None:
    """Why the API would refuse this body with a 400 (its model aside), or None."""
    if not isinstance(body, dict):
        return "Request body must be a JSON object."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if _has_empty_text_block(body):
        return "messages: text content blocks must be non-empty"
    empty = _empty_message(messages)
    if empty is not None:
        return (
            f"messages.{empty}: all messages must have non-empty content "
            "except for the optional final assistant message"
        )
    if not count_tokens and not (
        isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0
    ):
        return "max_tokens: Field required"
    try:
        _tool_call(body)
    except ToolTriggerError as exc:
        return str(exc)
    return None


def _last_user_text(body: dict[str, Any]) -> str:
    last = body["messages"][-1]
    content = last.get("content") if isinstance(last, dict) else ""
    if isinstance(content, list):
        content = " ".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict)
        )
    return str(content)


def _tool_call(body: dict[str, Any]) -> dict[str, Any] | None:
    match = _TOOL_CALL.fullmatch(_last_user_text(body))
    if match is None:
        steered = steered_call(body, TOOL_TRIGGER)
        return None if steered is None else _call(*steered)
    try:
        tool_input = json.loads(match.group(2)) if match.group(2).strip() else {}
    except ValueError:
        tool_input = None
    if not isinstance(tool_input, dict):
        raise ToolTriggerError(
            f"messages: the text after `{TOOL_TRIGGER} {match.group(1)}` must be the tool "
            "call's input, a JSON object"
        )
    return _call(match.group(1), tool_input)


def _call(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_sim_{uuid.uuid4().hex[:24]}",
        "name": name,
        "input": tool_input,
    }


def _words(body: dict[str, Any]) -> list[str]:
    text = f"(simulated) You said: {_last_user_text(body)[:200]}"
    return re.findall(r"\S+\s*", text) or ["(simulated)"]


def input_tokens(body: Any) -> int:
    """A stand-in count: about four bytes of JSON per token, as a rough tokenizer gives."""
    return max(1, len(json.dumps(body)) // 4)


def reply_message(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The whole reply to a valid body (see `request_problem`), as a Messages API message."""
    call = _tool_call(body)
    if call is None:
        words = _words(body)
        content: list[dict[str, Any]] = [{"type": "text", "text": "".join(words)}]
        output_tokens, stop_reason = len(words), "end_turn"
    else:
        content = [call]
        output_tokens, stop_reason = max(1, len(json.dumps(call["input"])) // 4), "tool_use"
    return simulated_message(body, model, content, stop_reason, output_tokens)


def simulated_message(
    body: Any, model: str, content: list[dict[str, Any]], stop_reason: str, output_tokens: int
) -> dict[str, Any]:
    """A Messages API message as the simulator answers `body` with it."""
    return {
        "id": f"msg_sim_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens(body), "output_tokens": output_tokens},
    }


def _deltas(block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if block["type"] == "text":
        for word in re.findall(r"\S+\s*", block["text"]):
            yield {"type": "text_delta", "text": word}
        return
    text = json.dumps(block["input"])
    for start in range(0, len(text), INPUT_JSON_PIECE):
        yield {"type": "input_json_delta", "partial_json": text[start : start + INPUT_JSON_PIECE]}


def reply_events(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`message` as the stream of Messages API events that builds it, in the API's order."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        empty = {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
        yield {"type": "content_block_start", "index": index, "content_block": empty}
        if index == 0:
            yield {"type": "ping"}
        for delta in _deltas(block):
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    yield {"type": "message_stop"}
