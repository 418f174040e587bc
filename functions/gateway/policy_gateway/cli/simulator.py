"""A built-in stand-in for the Messages API, for the first run on a laptop.

It answers like the real API, JSON and SSE, with the API's error shapes: an
unknown model is a 404 `not_found_error` and a malformed request a 400
`invalid_request_error`, which is enough to watch a policy-caused error turn
into a passthrough fallback. It is only ever started when asked for
(`policy-gateway serve --simulate-upstream`), never in Lambda.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import error_body

# Current model families answer; anything else (a typo, a retired model such as
# claude-instant-1.2) is a 404 `not_found_error`, as the real API answers.
KNOWN_MODELS = re.compile(r"^claude-(?:(?:opus|sonnet|haiku|fable|mythos)-\d[\w.-]*|3-[\w.-]+)$")


def _error(status: int, message: str) -> JSONResponse:
    body = error_body(status, message)
    body["request_id"] = f"req_sim_{uuid.uuid4().hex[:20]}"
    return JSONResponse(body, status_code=status)


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


def _validate(body: Any, count_tokens: bool) -> JSONResponse | None:
    if not isinstance(body, dict):
        return _error(400, "Request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str):
        return _error(400, "model: Field required")
    if not KNOWN_MODELS.match(model):
        return _error(404, f"model: {model}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return _error(400, "messages: at least one message is required")
    if _has_empty_text_block(body):
        return _error(400, "messages: text content blocks must be non-empty")
    if not count_tokens and not (
        isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0
    ):
        return _error(400, "max_tokens: Field required")
    return None


def _last_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1].get("content") if isinstance(body["messages"][-1], dict) else ""
    if isinstance(content, list):
        content = " ".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict)
        )
    return str(content)


def _words(body: dict[str, Any]) -> list[str]:
    text = f"(simulated) You said: {_last_user_text(body)[:200]}"
    return re.findall(r"\S+\s*", text) or ["(simulated)"]


def _usage(body: dict[str, Any], output_tokens: int) -> dict[str, int]:
    return {"input_tokens": max(1, len(json.dumps(body)) // 4), "output_tokens": output_tokens}


def _sse(event: str, payload: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()


async def _stream(body: dict[str, Any], message: dict[str, Any]) -> AsyncIterator[bytes]:
    words = _words(body)
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    yield _sse("ping", {"type": "ping"})
    for word in words:
        yield _sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": word},
            },
        )
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": len(words)},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


async def messages(request: Request) -> Response:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _error(400, "Request body is not valid JSON.")
    invalid = _validate(body, count_tokens=False)
    if invalid is not None:
        return invalid
    words = _words(body)
    message = {
        "id": f"msg_sim_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": "".join(words)}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": _usage(body, len(words)),
    }
    headers = {"request-id": f"req_sim_{uuid.uuid4().hex[:20]}"}
    if body.get("stream") is True:
        return StreamingResponse(
            _stream(body, message), media_type="text/event-stream", headers=headers
        )
    return JSONResponse(message, headers=headers)


async def count_tokens(request: Request) -> Response:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _error(400, "Request body is not valid JSON.")
    invalid = _validate(body, count_tokens=True)
    if invalid is not None:
        return invalid
    return JSONResponse({"input_tokens": _usage(body, 0)["input_tokens"]})


def create_simulator() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        ]
    )
