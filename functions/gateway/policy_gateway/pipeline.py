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
from collections.abc import Awaitable, Callable
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

from . import fallback, lambda_context, metrics, offload, settings, sse, tracing
from .auth import Authenticator, Credentials
from .budget import FallbackBudget
from .errors import GatewayError, error_body, error_bytes
from .flag import FallbackFlag
from .logs import bind_call_key, call_context, logger
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
DEADLINE_ERROR = (504, "The gateway ended the call before its Lambda deadline.", "timeout_error")
_UNREADABLE = (
    502,
    "The upstream answered in a form the gateway's response policies cannot read.",
    "api_error",
)
# Bodies above this are parsed on the worker loop even when no request hook runs:
# parsing a few megabytes of tiny objects takes a few hundred milliseconds.
OFFLOAD_BODY_BYTES = 64 * 1024


@dataclass
class Gateway:
    """Everything a call needs that outlives it."""

    config: settings.Settings
    relay: Relay
    flag: FallbackFlag
    policies: PolicySource
    auth: Authenticator
    budget: FallbackBudget

    async def warm(self) -> None:
        """Make the AWS reads a first call would otherwise make, so that init pays for them.

        The chain (from SSM when configured so), the fallback flag when a
        fallback is possible (the chain has request hooks), and the secrets in
        `gateway_key` mode. Each read is bounded (`parameters.READ_DEADLINE_SECONDS`)
        and a failed one is handled as on any call: a gateway whose chain could
        not load is ready to refuse calls, exactly as it would after start-up.
        """
        await asyncio.gather(self.auth.warm(), self._warm_policies())

    async def _warm_policies(self) -> None:
        chain = await self.policies.load()
        if chain is not None and chain.modifies_requests:
            await self.flag.enabled()


@dataclass
class Call:
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


class GatewayEndpoint:
    """The shell of every call: its id and log line, auth, the body, the client's disconnect.

    Subclasses say how the body is read (`_read`) and what reaches the
    upstream (`_proxy`); the call's bookkeeping, metrics and error answers
    are the same on every route.
    """

    def __init__(self, gateway: Gateway, endpoint: str) -> None:
        self._gateway = gateway
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = dict(scope["headers"]).get
        invocation = (
            lambda_context.from_headers(
                _text(header(b"x-amzn-lambda-context")), _text(header(b"x-amzn-request-context"))
            )
            if self._gateway.config.trust_lambda_context
            else lambda_context.InvocationContext()
        )
        call = Call(call_id=invocation.request_id or uuid.uuid4().hex, endpoint=self._endpoint)
        with (
            tracing.call(header, scope["path"]) as trace,
            call_context(
                call_id=call.call_id, correlation_id=invocation.url_request_id or call.call_id
            ),
        ):
            try:
                await self._handle(scope, receive, send, header, call, invocation)
            except GatewayError as exc:
                await respond(send, call, exc.status, exc.to_bytes())
            finally:
                trace.status = call.status
                self._finish(call)

    def _finish(self, call: Call) -> None:
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
                "latency_ms": round(elapsed_ms, 2),
            },
        )

    async def _handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        header: Callable[[bytes], bytes | None],
        call: Call,
        invocation: lambda_context.InvocationContext,
    ) -> None:
        credentials = await self._gateway.auth.authorize(scope["headers"])
        # A principal Lambda verified (Function URL AuthType AWS_IAM) names the
        # caller best; else the gateway key's name or the client key's digest.
        call.caller = invocation.iam_principal or credentials.caller
        if call.caller:
            bind_call_key("caller", call.caller)
        original = await self._read(receive, header)
        with anyio.CancelScope() as until_disconnect:
            watcher = asyncio.get_running_loop().create_task(
                _watch_disconnect(receive, call, until_disconnect)
            )
            try:
                await self._proxy(scope, send, call, invocation, credentials, original)
            finally:
                watcher.cancel()
        if call.disconnected:
            call.status = 499
            logger.info("client disconnected; stopped the call")

    async def _read(self, receive: Receive, header: Callable[[bytes], bytes | None]) -> bytes:
        """The request body: a JSON document the policies will read."""
        _check_content_type(header(b"content-type"))
        check_content_encoding(header(b"content-encoding"))
        return await read_body(receive, header(b"content-length"))

    async def _proxy(
        self,
        scope: Scope,
        send: Send,
        call: Call,
        invocation: lambda_context.InvocationContext,
        credentials: Credentials,
        original: bytes,
    ) -> None:
        raise NotImplementedError

    def _deadline(self, invocation: lambda_context.InvocationContext) -> float | None:
        """When this call must have answered: the Lambda deadline less the margin."""
        deadline = invocation.deadline_epoch
        return None if deadline is None else deadline - self._gateway.config.deadline_margin

    async def _reach(
        self,
        send: Send,
        call: Call,
        credentials: Credentials,
        reach: Callable[[], Awaitable[UpstreamResponse]],
        deadline: float | None,
        *,
        read: bool,
    ) -> tuple[UpstreamResponse, bytes] | None:
        """Reach the upstream within the deadline; the answer, or None once its error was sent.

        With `read`, the whole body comes back too (it is b"" otherwise). An
        upstream status error goes to the client as the upstream said it, with
        this call's credentials scrubbed from it.
        """
        body = b""
        try:
            # The deadline covers the wait for the upstream's answer too: a
            # slow first byte must not outlive the Lambda invocation either.
            with anyio.move_on_after(seconds_until(deadline)) as budget:
                upstream = await reach()
                if read:
                    try:
                        body = await upstream.read()
                    finally:
                        upstream.span.end()
        except UpstreamStatusError as error:
            if call.fallback == "failed":
                metrics.count(settings.METRIC_FALLBACK_FAILED)
            error.span.end()
            await respond(
                send, call, error.status, credentials.scrub(error.client_body), error.headers
            )
            return None
        except UpstreamUnavailable as exc:
            if call.fallback == "failed":
                metrics.count(settings.METRIC_FALLBACK_FAILED)
            raise GatewayError(504 if exc.timeout else 502, str(exc)) from None
        if budget.cancelled_caught:
            raise GatewayError(*DEADLINE_ERROR)
        if call.fallback == "succeeded":
            metrics.count(settings.METRIC_FALLBACK_SUCCEEDED)
        return upstream, body


class MessagesEndpoint(GatewayEndpoint):
    """ASGI endpoint for POST /v1/messages and /v1/messages/count_tokens."""

    async def _proxy(
        self,
        scope: Scope,
        send: Send,
        call: Call,
        invocation: lambda_context.InvocationContext,
        credentials: Credentials,
        original: bytes,
    ) -> None:
        """Parse, run the chain, reach the upstream (with the fallback), relay the answer."""
        gateway = self._gateway
        chain = await gateway.policies.chain()
        prepare = _prepare(original, chain, self._endpoint, call.call_id)
        try:
            if chain.modifies_requests or len(original) > OFFLOAD_BODY_BYTES:
                request, sent, ctx = await offload.run(prepare)
            else:
                request, sent, ctx = await prepare
        except (PolicyViolation, PolicyFailure) as exc:
            raise policy_error(exc) from None
        call.stream = ctx.stream
        attempted = fallback.Attempted(original=original, sent=sent, modified=request)
        forward = credentials.headers
        deadline = self._deadline(invocation)
        path = upstream_path(scope, credentials)

        async def attempt(body: bytes, label: str) -> UpstreamResponse:
            call.attempts += 1
            return await gateway.relay.attempt(
                path,
                body,
                forward,
                stream=call.stream,
                label=label,
                deadline=deadline,
            )

        async def reach_upstream() -> UpstreamResponse:
            try:
                return await attempt(sent, "policy")
            except UpstreamStatusError as error:
                try:
                    fall_back = chain.modifies_requests and await fallback.should_fall_back(
                        error, attempted, chain, gateway.flag
                    )
                    # The budget is spent only when everything else allows the
                    # fallback, and before anything records it.
                    if fall_back and not await gateway.budget.allows(call.caller):
                        call.fallback = "denied"
                        fall_back = False
                    if fall_back:
                        await fallback.record(error, attempted, chain, ctx, credentials.scrub)
                finally:
                    error.span.end()
                if not fall_back:
                    raise
            call.fallback = "failed"
            upstream = await attempt(original, "passthrough-fallback")
            call.fallback = "succeeded"
            return upstream

        reached = await self._reach(
            send, call, credentials, reach_upstream, deadline, read=not call.stream
        )
        if reached is None:
            return
        upstream, body = reached
        if call.stream:
            await _relay_stream(upstream, chain, ctx, call, send, deadline)
        else:
            await _relay_json(upstream, body, chain, ctx, call, send)


def upstream_path(scope: Scope, credentials: Credentials) -> str:
    """The path (and query) the upstream gets: the client's, minus any credential."""
    path: str = scope["path"]
    if scope.get("query_string"):
        # A credential never travels upstream in the URL either (a client
        # that put its gateway key there would hand it to Anthropic).
        path += "?" + credentials.scrub_query(scope["query_string"]).decode("latin-1")
    return path


async def _prepare(
    original: bytes, chain: PolicyChain, endpoint: str, call_id: str
) -> tuple[dict[str, Any], bytes, PolicyContext]:
    """Parse, run the request hooks, serialize: the request, the bytes to send, the context.

    Policy errors are raised as they are, for the serving loop to count and log.
    """
    request = parse_object(original)
    stream = endpoint == "messages" and request.get("stream") is True
    ctx = PolicyContext(endpoint=endpoint, stream=stream, call_id=call_id)
    if not chain.modifies_requests:
        return request, original, ctx
    await chain.apply_request(request, ctx)
    if (request.get("stream") is True) != stream:
        raise PolicyFailure("<chain>", "on_request: changed 'stream'")
    return request, dump_json(request), ctx


async def _watch_disconnect(receive: Receive, call: Call, scope: anyio.CancelScope) -> None:
    """Cancel the call's work the moment the client goes away.

    A streaming Lambda keeps running, and billing, until it stops reading the
    upstream; a non-streaming call would otherwise wait out a whole generation.
    """
    while (await receive())["type"] != "http.disconnect":
        pass
    call.disconnected = True
    scope.cancel()


def seconds_until(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.time()


async def _relay_json(
    upstream: UpstreamResponse,
    body: bytes,
    chain: PolicyChain,
    ctx: PolicyContext,
    call: Call,
    send: Send,
) -> None:
    if _watched(chain) and ctx.endpoint == "messages":
        try:
            response = json.loads(body)
        except (ValueError, RecursionError):
            response = None
        if not isinstance(response, dict):
            # What the response policies cannot read must not reach the client unseen.
            raise GatewayError(*_UNREADABLE)
        if chain.has_response_hooks:
            try:
                await chain.apply_response(response, ctx)
            except (PolicyViolation, PolicyFailure) as exc:
                raise policy_error(exc) from None
            body = dump_json(response)
    await respond(send, call, upstream.status, body, upstream.headers)


def _watched(chain: PolicyChain) -> bool:
    """Whether policies read answers, so an answer they cannot read fails the call closed."""
    return chain.has_response_hooks or chain.filters_stream


async def _relay_stream(
    upstream: UpstreamResponse,
    chain: PolicyChain,
    ctx: PolicyContext,
    call: Call,
    send: Send,
    deadline: float | None,
) -> None:
    """Relay SSE frame by frame; commit on the first upstream event."""
    committed = False
    decoder = sse.SSEDecoder()
    filtering = chain.filters_stream
    if _watched(chain) and not _is_event_stream(upstream.headers):
        await upstream.close()
        upstream.span.end()
        raise GatewayError(*_UNREADABLE)

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
        with anyio.move_on_after(seconds_until(deadline)) as budget:
            try:
                await pump()
            except (PolicyViolation, PolicyFailure) as exc:
                error = policy_error(exc)
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
            failure = DEADLINE_ERROR
    finally:
        await upstream.close()
        upstream.span.end()
    if failure is not None:
        status, message, kind = failure
        if not committed:
            await respond(send, call, status, error_bytes(status, message, kind))
            return
        frame = StreamEvent.from_json("error", error_body(status, message, kind))
        await send({"type": "http.response.body", "body": sse.encode(frame), "more_body": True})
    elif not committed:
        await respond(
            send, call, 502, error_bytes(502, "The upstream stream ended before any event.")
        )
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _is_event_stream(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(
        key == b"content-type" and value.split(b";", 1)[0].strip().lower() == b"text/event-stream"
        for key, value in headers
    )


def policy_error(exc: PolicyViolation | PolicyFailure) -> GatewayError:
    if isinstance(exc, PolicyViolation):
        metrics.count(settings.METRIC_POLICY_BLOCKS)
        return GatewayError(exc.status, exc.message, exc.error_type)
    if isinstance(exc.__cause__, RecursionError):
        # The policy walked a body nested deeper than Python's stack allows: the
        # input's fault, not the policy's.
        return GatewayError(400, "Request body is nested too deeply.")
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


async def read_body(receive: Receive, declared: bytes | None) -> bytes:
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


def check_content_encoding(value: bytes | None) -> None:
    """Refuse compressed bodies: the policies read the body as JSON text, and the
    upstream must read the very same bytes (the header never goes upstream)."""
    coding = (value or b"").strip().lower()
    if coding and coding != b"identity":
        raise GatewayError(
            415,
            f"Content-Encoding {coding.decode('latin-1')!r} is not supported; "
            "send the request body uncompressed.",
        )


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _DuplicateKey
    return document


def parse_object(body: bytes) -> dict[str, Any]:
    """The request as the policies see it, refused when an upstream could read it otherwise.

    A key given twice is read as its last value here but as its first by some
    parsers; `stream` other than a JSON boolean is false here but true to a lax
    upstream, whose events would then bypass the stream policies.
    """
    try:
        parsed = json.loads(body, object_pairs_hook=_unique_keys)
    except _DuplicateKey:
        raise GatewayError(400, "Request body has a duplicate key in an object.") from None
    except ValueError as exc:
        raise GatewayError(400, f"Request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise GatewayError(400, "Request body is nested too deeply.") from None
    if not isinstance(parsed, dict):
        raise GatewayError(400, "Request body must be a JSON object.")
    if "stream" in parsed and not isinstance(parsed["stream"], bool):
        raise GatewayError(400, "stream: must be a boolean (true or false).")
    return parsed


def dump_json(document: dict[str, Any]) -> bytes:
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
    except RecursionError:
        raise GatewayError(400, "Request body is nested too deeply.") from None


def _merge(
    upstream: list[tuple[bytes, bytes]], ours: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    replaced = {key for key, _ in ours}
    return [item for item in upstream if item[0] not in replaced] + ours


async def respond(
    send: Send,
    call: Call,
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
