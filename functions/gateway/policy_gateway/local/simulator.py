"""A built-in stand-in for the Messages API, for the first run on a laptop.

It answers like the real API, JSON and SSE, with the API's error shapes: an
unknown model is a 404 `not_found_error` and a malformed request a 400
`invalid_request_error`, which is enough to watch a policy-caused error turn
into a passthrough fallback. Its replies, a tool call among them, are
simulated_reply.py's; a judging policy's call is answered by markers
(simulated_judge.py), and it logs what it received, one line per request
(upstream_view.py). It also answers the Models API (simulated_models.py) and
Message Batches (simulated_batches.py), so a client's batch runs locally too;
any other route is a 404 that names the simulator (simulated_errors.py). It is
only ever started when asked for (`policy-gateway serve --simulate-upstream`),
never in Lambda.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .simulated_batches import Clock, SimulatedBatches
from .simulated_errors import error, refusal, request_id
from .simulated_judge import is_judge_call, judge_message
from .simulated_models import get_model, list_models
from .simulated_reply import input_tokens, reply_events, reply_message
from .upstream_view import log_received


async def _stream(message: dict[str, Any]) -> AsyncIterator[bytes]:
    for event in reply_events(message):
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


async def _accepted(request: Request, count_tokens: bool) -> dict[str, Any] | JSONResponse:
    """The request's body if the API would take it, else the API's error answer."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return error(400, "Request body is not valid JSON.")
    refused = refusal(body, count_tokens)
    if refused is not None:
        return error(*refused)
    assert isinstance(body, dict)
    return body


async def messages(request: Request) -> Response:
    body = await _accepted(request, count_tokens=False)
    if isinstance(body, JSONResponse):
        return body
    if is_judge_call(body):
        message = judge_message(body, body["model"])
    else:
        message = reply_message(body, body["model"])
    headers = {"request-id": request_id()}
    log_received(body, headers["request-id"])
    if body.get("stream") is True:
        return StreamingResponse(_stream(message), media_type="text/event-stream", headers=headers)
    return JSONResponse(message, headers=headers)


async def count_tokens(request: Request) -> Response:
    body = await _accepted(request, count_tokens=True)
    if isinstance(body, JSONResponse):
        return body
    return JSONResponse({"input_tokens": input_tokens(body)})


async def _unserved(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (a route or method it lacks), in the API's error shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    return error(status, f"{request.method} {request.url.path}")


def create_simulator(clock: Clock = time.time) -> Starlette:
    batches = SimulatedBatches(clock)
    batch = "/v1/messages/batches/{message_batch_id}"
    return Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route("/v1/messages/batches", batches.create, methods=["POST"]),
            Route("/v1/messages/batches", batches.list, methods=["GET"]),
            Route(batch, batches.retrieve, methods=["GET"]),
            Route(batch, batches.delete, methods=["DELETE"]),
            Route(f"{batch}/cancel", batches.cancel, methods=["POST"]),
            Route(f"{batch}/results", batches.results, methods=["GET"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{model_id}", get_model, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _unserved},
    )
