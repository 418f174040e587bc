"""A built-in stand-in for Bedrock Runtime, the local run's upstream with UPSTREAM_PROVIDER=bedrock.

`policy-gateway serve --simulate-upstream` starts it instead of the Messages
API simulator when the gateway is to call Bedrock, and points
AWS_ENDPOINT_URL_BEDROCK_RUNTIME at it, so nothing reaches AWS. It answers
the three operations the gateway calls as Bedrock does: InvokeModel with
Messages API JSON, InvokeModelWithResponseStream with event-stream frames
(both checksums valid, each `chunk` a base64 Messages API event), and
CountTokens with `{"inputTokens": N}`; errors are Bedrock's (`{"message"}`
and `x-amzn-errortype`). The replies, a tool call among them, are
simulated_reply.py's. A request must carry a SigV4 signature for the service
`bedrock` (its value is not checked: the stand-in knows no secret key).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..upstream.bedrock.eventstream import encode_message
from .simulated_reply import input_tokens, reply_events, reply_message, request_problem

EVENT_STREAM = "application/vnd.amazon.eventstream"
_SIGNATURE_PREFIX = "AWS4-HMAC-SHA256 Credential="
_SIGNED_FOR_BEDROCK = "/bedrock/aws4_request,"


def _error(status: int, name: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"message": message},
        status_code=status,
        headers={
            "x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "x-amzn-requestid": str(uuid.uuid4()),
        },
    )


def _refusal(request: Request) -> JSONResponse | None:
    """What Bedrock answers before it looks at the body: an unsigned call, an unknown model."""
    authorization = request.headers.get("authorization", "")
    if not (authorization.startswith(_SIGNATURE_PREFIX) and _SIGNED_FOR_BEDROCK in authorization):
        return _error(403, "UnrecognizedClientException", "The security token is not valid.")
    if "anthropic." not in request.path_params["model_id"]:
        return _error(400, "ValidationException", "The provided model identifier is invalid.")
    return None


async def _accepted(request: Request, count_tokens: bool) -> dict[str, Any] | JSONResponse:
    """The Messages API body of the request if Bedrock would take it, else Bedrock's refusal."""
    refused = _refusal(request)
    if refused is not None:
        return refused
    try:
        body = json.loads(await request.body())
        if count_tokens:
            body = json.loads(base64.b64decode(body["input"]["invokeModel"]["body"]))
    except (ValueError, KeyError, TypeError, binascii.Error):
        return _error(400, "ValidationException", "Malformed input request.")
    problem = request_problem(body, count_tokens=False)
    if problem is not None:
        return _error(400, "ValidationException", problem)
    assert isinstance(body, dict)
    return body


def _chunk(event: dict[str, Any]) -> bytes:
    data = base64.b64encode(json.dumps(event).encode()).decode()
    return encode_message(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        json.dumps({"bytes": data}).encode(),
    )


async def _frames(message: dict[str, Any]) -> AsyncIterator[bytes]:
    for event in reply_events(message):
        if event["type"] == "message_stop":
            # Bedrock's last event carries the invocation's metrics.
            event = {
                **event,
                "amazon-bedrock-invocationMetrics": {
                    "inputTokenCount": message["usage"]["input_tokens"],
                    "outputTokenCount": message["usage"]["output_tokens"],
                    "invocationLatency": 1,
                    "firstByteLatency": 1,
                },
            }
        yield _chunk(event)


async def invoke(request: Request) -> Response:
    body = await _accepted(request, count_tokens=False)
    if isinstance(body, JSONResponse):
        return body
    message = reply_message(body, request.path_params["model_id"])
    usage = message["usage"]
    return JSONResponse(
        message,
        headers={
            "x-amzn-requestid": str(uuid.uuid4()),
            "x-amzn-bedrock-input-token-count": str(usage["input_tokens"]),
            "x-amzn-bedrock-output-token-count": str(usage["output_tokens"]),
        },
    )


async def invoke_with_response_stream(request: Request) -> Response:
    body = await _accepted(request, count_tokens=False)
    if isinstance(body, JSONResponse):
        return body
    message = reply_message(body, request.path_params["model_id"])
    return StreamingResponse(
        _frames(message),
        media_type=EVENT_STREAM,
        headers={
            "x-amzn-requestid": str(uuid.uuid4()),
            "x-amzn-bedrock-content-type": "application/json",
        },
    )


async def count_tokens(request: Request) -> Response:
    body = await _accepted(request, count_tokens=True)
    if isinstance(body, JSONResponse):
        return body
    return JSONResponse(
        {"inputTokens": input_tokens(body)}, headers={"x-amzn-requestid": str(uuid.uuid4())}
    )


def create_bedrock_simulator() -> Starlette:
    return Starlette(
        routes=[
            Route("/model/{model_id:path}/invoke", invoke, methods=["POST"]),
            Route(
                "/model/{model_id:path}/invoke-with-response-stream",
                invoke_with_response_stream,
                methods=["POST"],
            ),
            Route("/model/{model_id:path}/count-tokens", count_tokens, methods=["POST"]),
        ]
    )
