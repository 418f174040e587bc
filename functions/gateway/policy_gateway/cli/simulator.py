"""A built-in stand-in for the Messages API, for the first run on a laptop.

It answers like the real API, JSON and SSE, with the API's error shapes: an
unknown model is a 404 `not_found_error` and a malformed request a 400
`invalid_request_error`, which is enough to watch a policy-caused error turn
into a passthrough fallback. Its replies, a tool call among them, are
simulated_reply.py's. It is only ever started when asked for
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
from .simulated_reply import input_tokens, reply_events, reply_message, request_problem

# Current model families answer; anything else (a typo, a retired model such as
# claude-instant-1.2) is a 404 `not_found_error`, as the real API answers.
KNOWN_MODELS = re.compile(r"^claude-(?:(?:opus|sonnet|haiku|fable|mythos)-\d[\w.-]*|3-[\w.-]+)$")


def _error(status: int, message: str) -> JSONResponse:
    body = error_body(status, message)
    body["request_id"] = f"req_sim_{uuid.uuid4().hex[:20]}"
    return JSONResponse(body, status_code=status)


def _validate(body: Any, count_tokens: bool) -> JSONResponse | None:
    if isinstance(body, dict):
        model = body.get("model")
        if not isinstance(model, str):
            return _error(400, "model: Field required")
        if not KNOWN_MODELS.match(model):
            return _error(404, f"model: {model}")
    problem = request_problem(body, count_tokens)
    return None if problem is None else _error(400, problem)


async def _stream(message: dict[str, Any]) -> AsyncIterator[bytes]:
    for event in reply_events(message):
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


async def _accepted(request: Request, count_tokens: bool) -> dict[str, Any] | JSONResponse:
    """The request's body if the API would take it, else the API's error answer."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _error(400, "Request body is not valid JSON.")
    invalid = _validate(body, count_tokens)
    if invalid is not None:
        return invalid
    assert isinstance(body, dict)
    return body


async def messages(request: Request) -> Response:
    body = await _accepted(request, count_tokens=False)
    if isinstance(body, JSONResponse):
        return body
    message = reply_message(body, body["model"])
    headers = {"request-id": f"req_sim_{uuid.uuid4().hex[:20]}"}
    if body.get("stream") is True:
        return StreamingResponse(_stream(message), media_type="text/event-stream", headers=headers)
    return JSONResponse(message, headers=headers)


async def count_tokens(request: Request) -> Response:
    body = await _accepted(request, count_tokens=True)
    if isinstance(body, JSONResponse):
        return body
    return JSONResponse({"input_tokens": input_tokens(body)})


def create_simulator() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        ]
    )
