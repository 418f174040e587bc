"""One call through the gateway: request in → policy chain → upstream attempt(s) →
response policies → client.

This is an explicit ASGI endpoint so the moment the client sees a status line
is ours to choose. A stream commits (sends 200 and the SSE headers) only when
the first upstream event has arrived; before that, any failure is answered
with its real HTTP status and JSON body, exactly as direct access would.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from gateway_policies import (
    PolicyChain,
    PolicyContext,
    PolicyFailure,
    PolicyViolation,
    StreamEvent,
)
from starlette.types import Message, Receive, Scope, Send

from . import fallback, lambda_context, metrics, settings, sse, tracing
from .auth import Authenticator, Credentials
from .errors import GatewayError, error_body, error_bytes
from .flag import FallbackFlag
from .logs import call_context, logger
from .policy_source import PolicySource
from .relay import Relay, UpstreamResponse, UpstreamStatusError, UpstreamUnavailable

_JSON = [(b"content-type", b"application/json")]
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]
# Bodies in these encodings are not a JSON document; forwarding one would let
# the upstream read something other than what the policies saw.
_FORM_TYPES = (b"multipart/", b"application/x-www-form-urlencoded")
_DEADLINE = (504, "The gateway ended the call before its Lambda deadline.", "timeout_error")


@dataclass
class Gateway:
    """Everything a call needs that outlives it."""

    config: settings.Settings
    relay: Relay
    flag: FallbackFlag
    policies: PolicySource
    auth: Authenticator


@dataclass
class _Call:
    """The state of one call, for its log line and metrics."""

    call_id: str
    endpoint: str
    started: float = field(default_factory=time.perf_counter)
    status: int = 0
    stream: bool = False
    attempts: int = 0
    fallback: str = "none"
    disconnected: bool = False
    caller: str | None = None
    upstream_request_id: str | None = None


class MessagesEndpoint:
    """ASGI endpoint for POST /v1/messages and /v1/messages/count_tokens."""

    def __init__(self, gateway: Gateway, endpoint: str) -> None:
        self._gateway = gateway
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = dict(scope["headers"]).get
        invocation = lambda_context.from_headers(
            _text(header(b"x-amzn-lambda-context")), _text(header(b"x-amzn-request-context"))
        )
        call = _Call(call_id=invocation.request_id or uuid.uuid4().hex, endpoint=self._endpoint)
        traced = tracing.begin_call(_text(header(b"x-amzn-trace-id")))
        with call_context(
            call_id=call.call_id, correlation_id=invocation.url_request_id or call.call_id
        ):
            try:
                await self._handle(scope, receive, send, header, call, invocation, traced)
            except GatewayError as exc:
                await _respond(send, call, exc.status, exc.to_bytes())
            finally:
                self._finish(call)

    def _finish(self, call: _Call) -> None:
        elapsed_ms = (time.perf_counter() - call.started) * 1000
        metrics.count(settings.METRIC_REQUESTS)
        metrics.milliseconds(settings.METRIC_LATENCY, elapsed_ms)
        metrics.flush()
        logger.info(
            "call finished",
            extra={
                "endpoint": call.endpoint,
                "status": call.status,
                "stream": call.stream,
                "attempts": call.attempts,
                "fallback": call.fallback,
                "caller": call.caller,
                "upstream_request_id": call.upstream_request_id,
                "latency_ms": round(elapsed_ms, 2),
            },
        )

    async def _handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        header: Callable[[bytes], bytes | None],
        call: _Call,
        invocation: lambda_context.InvocationContext,
        traced: bool,
    ) -> None:
        credentials = await self._gateway.auth.authorize(scope["headers"])
        call.caller = credentials.caller
        _check_content_type(header(b"content-type"))
        original = await _read_body(receive, header(b"content-length"))
        with anyio.CancelScope() as until_disconnect:
            watcher = asyncio.get_running_loop().create_task(
                _watch_disconnect(receive, call, until_disconnect)
            )
            try:
                await self._proxy(scope, send, call, invocation, traced, credentials, original)
            finally:
                watcher.cancel()
        if call.disconnected:
            call.status = 499
            logger.info("client disconnected; stopped the call")

    async def _proxy(
        self,
        scope: Scope,
        send: Send,
        call: _Call,
        invocation: lambda_context.InvocationContext,
        traced: bool,
        credentials: Credentials,
        original: bytes,
    ) -> None:
        """Parse, run the chain, reach the upstream (with the fallback), relay the answer."""
        gateway = self._gateway
        request = _parse(original)
        call.stream = self._endpoint == "messages" and request.get("stream") is True
        chain = await gateway.policies.chain()
        ctx = PolicyContext(endpoint=self._endpoint, stream=call.stream, call_id=call.call_id)
        try:
            await chain.apply_request(request, ctx)
        except (PolicyViolation, PolicyFailure) as exc:
            raise _policy_error(exc) from None
        if chain.modifies_requests and (request.get("stream") is True) != call.stream:
            raise _policy_error(PolicyFailure("<chain>", "on_request: changed 'stream'"))
        sent = _dump(request) if chain.modifies_requests else original
        attempted = fallback.Attempted(original=original, sent=sent, modified=request)
        forward = credentials.headers
        deadline = invocation.deadline_epoch
        if deadline is not None:
            deadline -= gateway.config.deadline_margin
        path = scope["path"]
        if scope.get("query_string"):
            # A credential never travels upstream in the URL either (a client
            # that put its gateway key there would hand it to Anthropic).
            path += "?" + credentials.scrub(scope["query_string"]).decode("latin-1")

        async def attempt(body: bytes, label: str) -> UpstreamResponse:
            call.attempts += 1
            try:
                upstream = await gateway.relay.attempt(
                    path,
                    body,
                    forward,
                    stream=call.stream,
                    traced=traced,
                    label=label,
                    deadline=deadline,
                )
            except UpstreamStatusError as error:
                call.upstream_request_id = error.request_id
                raise
            call.upstream_request_id = upstream.request_id
            return upstream

        async def reach_upstream() -> UpstreamResponse:
            try:
                return await attempt(sent, "policy")
            except UpstreamStatusError as error:
                try:
                    fall_back = chain.modifies_requests and await fallback.should_fall_back(
                        error, attempted, chain, gateway.flag
                    )
                    if fall_back:
                        await fallback.record(error, attempted, chain, ctx)
                finally:
                    error.span.end()
                if not fall_back:
                    raise
            call.fallback = "failed"
            upstream = await attempt(original, "passthrough-fallback")
            call.fallback = "succeeded"
            return upstream

        body = b""
        try:
            # The deadline covers the wait for the upstream's answer too: a
            # slow first byte must not outlive the Lambda invocation either.
            with anyio.move_on_after(_seconds_until(deadline)) as budget:
                upstream = await reach_upstream()
                if not call.stream:
                    try:
                        body = await upstream.read()
                    finally:
                        upstream.span.end()
        except UpstreamStatusError as error:
            if call.fallback == "failed":
                metrics.count(settings.METRIC_FALLBACK_FAILED)
            error.span.end()
            await _respond(
                send, call, error.status, credentials.scrub(error.client_body), error.headers
            )
            return
        except UpstreamUnavailable as exc:
            if call.fallback == "failed":
                metrics.count(settings.METRIC_FALLBACK_FAILED)
            raise GatewayError(504 if exc.timeout else 502, str(exc)) from None
        if budget.cancelled_caught:
            raise GatewayError(*_DEADLINE)
        if call.fallback == "succeeded":
            metrics.count(settings.METRIC_FALLBACK_SUCCEEDED)
        if call.stream:
            await _relay_stream(upstream, chain, ctx, call, send, deadline)
        else:
            await _relay_json(upstream, body, chain, ctx, call, send)


async def _watch_disconnect(receive: Receive, call: _Call, scope: anyio.CancelScope) -> None:
    """Cancel the call's work the moment the client goes away.

    A streaming Lambda keeps running, and billing, until it stops reading the
    upstream; a non-streaming call would otherwise wait out a whole generation.
    """
    while (await receive())["type"] != "http.disconnect":
        pass
    call.disconnected = True
    scope.cancel()


def _seconds_until(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.time()


async def _relay_json(
    upstream: UpstreamResponse,
    body: bytes,
    chain: PolicyChain,
    ctx: PolicyContext,
    call: _Call,
    send: Send,
) -> None:
    if chain.has_response_hooks and ctx.endpoint == "messages":
        try:
            response = json.loads(body)
        except ValueError:
            response = None
        if isinstance(response, dict):
            try:
                await chain.apply_response(response, ctx)
            except (PolicyViolation, PolicyFailure) as exc:
                raise _policy_error(exc) from None
            body = _dump(response)
    await _respond(send, call, upstream.status, body, upstream.headers)


async def _relay_stream(
    upstream: UpstreamResponse,
    chain: PolicyChain,
    ctx: PolicyContext,
    call: _Call,
    send: Send,
    deadline: float | None,
) -> None:
    """Relay SSE frame by frame; commit on the first upstream event."""
    committed = False
    decoder = sse.SSEDecoder()
    filtering = chain.filters_stream

    async def deliver(events: list[StreamEvent]) -> None:
        nonlocal committed
        if not committed:
            committed = True
            call.status = upstream.status
            metrics.milliseconds(
                settings.METRIC_TIME_TO_FIRST_EVENT, (time.perf_counter() - call.started) * 1000
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status,
                    "headers": _merge(upstream.headers, _SSE_HEADERS),
                }
            )
        if events:
            await send(
                {"type": "http.response.body", "body": sse.encode_many(events), "more_body": True}
            )

    async def emit(events: list[StreamEvent]) -> None:
        if not filtering:
            await deliver(events)
            return
        passed: list[StreamEvent] = []
        try:
            for event in events:
                passed.extend(await chain.apply_stream_event(event, ctx))
        except (PolicyViolation, PolicyFailure):
            # Events a policy let through before the failure still go out, in
            # order, ahead of the error frame.
            if passed:
                await deliver(passed)
            raise
        await deliver(passed)

    async def pump() -> None:
        async with sse.coalesced(upstream.chunks()) as chunks:
            async for chunk in chunks:
                events = decoder.feed(chunk)
                if events:
                    await emit(events)
        last = decoder.flush()
        if last:
            await emit(last)
        if not committed:
            return
        if filtering:
            tail = await chain.apply_stream_end(ctx)
            if tail:
                await send(
                    {"type": "http.response.body", "body": sse.encode_many(tail), "more_body": True}
                )

    failure: tuple[int, str, str | None] | None = None
    try:
        with anyio.move_on_after(_seconds_until(deadline)) as budget:
            try:
                await pump()
            except (PolicyViolation, PolicyFailure) as exc:
                error = _policy_error(exc)
                failure = (error.status, error.message, error.error_type)
            except OSError:
                call.disconnected = True
                return
            except UpstreamUnavailable as exc:
                failure = (
                    (504, "The upstream stream stalled.", "timeout_error")
                    if exc.timeout
                    else (502, "The upstream stream ended unexpectedly.", "api_error")
                )
            except Exception as exc:
                logger.warning("upstream stream failed", extra={"error_type": type(exc).__name__})
                failure = (502, "The upstream stream ended unexpectedly.", "api_error")
        if budget.cancelled_caught:
            failure = _DEADLINE
    finally:
        await upstream.close()
        upstream.span.end()
    if failure is not None:
        status, message, kind = failure
        if not committed:
            await _respond(send, call, status, error_bytes(status, message, kind))
            return
        frame = StreamEvent.from_json("error", error_body(status, message, kind))
        await send({"type": "http.response.body", "body": sse.encode(frame), "more_body": True})
    elif not committed:
        await _respond(
            send, call, 502, error_bytes(502, "The upstream stream ended before any event.")
        )
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _policy_error(exc: PolicyViolation | PolicyFailure) -> GatewayError:
    if isinstance(exc, PolicyViolation):
        metrics.count(settings.METRIC_POLICY_BLOCKS)
        return GatewayError(exc.status, exc.message, exc.error_type)
    metrics.count(settings.METRIC_POLICY_ERRORS)
    logger.error(
        "policy failed; refusing the call",
        extra={
            "policy": exc.policy,
            "hook": exc.hook,
            "error_type": type(exc.__cause__).__name__,
        },
    )
    return GatewayError(500, f"Policy {exc.policy!r} failed; the call was refused.", "api_error")


async def _read_body(receive: Receive, declared: bytes | None) -> bytes:
    if declared is not None and declared.isdigit() and int(declared) > settings.MAX_REQUEST_BYTES:
        raise GatewayError(413, _too_large(), "request_too_large")
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise GatewayError(400, "The client disconnected before sending the whole body.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > settings.MAX_REQUEST_BYTES:
            raise GatewayError(413, _too_large(), "request_too_large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _too_large() -> str:
    return f"Request body exceeds the gateway's limit of {settings.MAX_REQUEST_BYTES} bytes."


def _check_content_type(value: bytes | None) -> None:
    """Refuse form encodings; any other type (or none) is judged by whether the body is JSON.

    The API's own clients send application/json, and curl users often send
    nothing or text/plain: the gateway is not stricter than the API about those.
    """
    media = (value or b"").split(b";", 1)[0].strip().lower()
    if media.startswith(_FORM_TYPES):
        raise GatewayError(
            400,
            f"Content-Type {media.decode('latin-1')!r} is not supported; "
            "send the request body as application/json.",
        )


def _parse(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError as exc:
        raise GatewayError(400, f"Request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise GatewayError(400, "Request body is nested too deeply.") from None
    if not isinstance(parsed, dict):
        raise GatewayError(400, "Request body must be a JSON object.")
    return parsed


def _dump(document: dict[str, Any]) -> bytes:
    """Serialize a (policy-changed) document for the wire.

    UTF-8 as is when possible; a lone surrogate (legal in JSON text, not in
    UTF-8) falls back to \\u escapes, as the client itself must have sent it.
    A number too large for a float was parsed as infinity, which JSON cannot
    express: that request is refused rather than forwarded altered.
    """
    try:
        text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(document, separators=(",", ":")).encode()
    except ValueError:
        raise GatewayError(400, "Request body has a number out of range.") from None


def _merge(
    upstream: list[tuple[bytes, bytes]], ours: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    replaced = {key for key, _ in ours}
    return [item for item in upstream if item[0] not in replaced] + ours


async def _respond(
    send: Send,
    call: _Call,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    call.status = status
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *_merge(headers or [], _JSON),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
