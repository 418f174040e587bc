"""The shell of every gateway route: the call's id and log line, auth, the body, the disconnect.

An explicit ASGI endpoint, so the moment the client sees a status line is
ours to choose. Subclasses say how the body is read (`_read`) and what reaches
the upstream (`_proxy`, through `Gateway.send` and `upstream_answer.reach`); the
call's bookkeeping, metrics and error answers are the same on every route. The
Messages API's own way through is messages.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import anyio
from starlette.types import Receive, Scope, Send

from .. import lambda_context, names
from ..auth.authenticator import path_for_spans
from ..auth.caller import identify
from ..call import FALLBACK_FAILED, FALLBACK_RETRYING, Call
from ..errors import GatewayError
from ..headers import HeaderLookup, forwarded_headers
from ..observability import audit, metrics, tracing
from ..observability.logs import bind_call_key, call_context, logger
from .body import check_content_encoding, check_content_type, read_body
from .gateway import Gateway


class GatewayEndpoint:
    """One call on one route; a new instance per call, so per-call state may live on it."""

    def __init__(self, gateway: Gateway, endpoint: str) -> None:
        self._gateway = gateway
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header: HeaderLookup = dict(scope["headers"]).get
        invocation = (
            lambda_context.from_headers(
                _text(header(b"x-amzn-lambda-context")), _text(header(b"x-amzn-request-context"))
            )
            if self._gateway.config.trust_lambda_context
            else lambda_context.InvocationContext()
        )
        call = Call(
            call_id=invocation.request_id or uuid.uuid4().hex,
            endpoint=self._endpoint,
            scope=scope,
            send=send,
            invocation=invocation,
            deadline=self._deadline(invocation),
        )
        with (
            tracing.call(
                header,
                scope["method"],
                path_for_spans(scope["headers"], scope["path"]),
                _route(scope),
                call.call_id,
            ) as trace,
            call_context(
                call_id=call.call_id, correlation_id=invocation.url_request_id or call.call_id
            ),
        ):
            call.trace_id = trace.trace_id
            try:
                await self._handle(call, receive, header)
            except GatewayError as exc:
                await call.respond(exc.status, exc.to_bytes())
            finally:
                trace.status = call.status
                if call.chain_version is None:
                    # A route no policy judges still names the chain in force.
                    call.chain_version = self._gateway.policies.version
                self._gateway.limits.settle(call)
                _finish(call)

    async def _handle(self, call: Call, receive: Receive, header: HeaderLookup) -> None:
        call.credentials = await self._gateway.auth.authorize(call.scope["headers"])
        call.credentials.refuse_path(call.scope["path"])
        call.forwarded = forwarded_headers(
            call.scope["headers"], call.credentials.upstream_credential
        )
        principal = call.invocation.iam_principal
        if principal:
            bind_call_key("principal", principal)
        call.caller, call.caller_groups = identify(call.credentials, principal)
        if call.caller:
            bind_call_key("caller", call.caller)
        call.original = await self._read(receive, header)
        with anyio.CancelScope() as until_disconnect:
            watcher = asyncio.get_running_loop().create_task(
                _watch_disconnect(receive, call, until_disconnect)
            )
            try:
                await self._proxy(call)
            finally:
                watcher.cancel()
        if call.disconnected and call.stream_error is None:
            call.status = 499
            logger.info("client disconnected; stopped the call")

    async def _read(self, receive: Receive, header: HeaderLookup) -> bytes:
        """The request body: a JSON document the policies will read."""
        check_content_type(header(b"content-type"))
        check_content_encoding(header(b"content-encoding"))
        return await read_body(receive, header(b"content-length"))

    async def _proxy(self, call: Call) -> None:
        raise NotImplementedError

    def _deadline(self, invocation: lambda_context.InvocationContext) -> float | None:
        deadline = invocation.deadline_epoch
        return None if deadline is None else deadline - self._gateway.config.deadline_margin


def _route(scope: Scope) -> str | None:
    """The path template of the route the call matched (Starlette's router records it)."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    return template if isinstance(template, str) else None


def _finish(call: Call) -> None:
    elapsed_ms = (time.perf_counter() - call.started) * 1000
    metrics.count(names.METRIC_REQUESTS)
    if call.status >= 500:
        metrics.count(names.METRIC_RESPONSES_5XX)
    metrics.milliseconds(names.METRIC_LATENCY, elapsed_ms)
    audited = audit.call_fields(call)
    metrics.flush()
    logger.info(
        names.LOG_CALL_FINISHED,
        extra={
            "endpoint": call.endpoint,
            "status": call.status,
            "stream": call.stream,
            "attempts": call.attempts,
            # A retry the deadline or a disconnect cut short never finished.
            "fallback": FALLBACK_FAILED if call.fallback == FALLBACK_RETRYING else call.fallback,
            "caller": call.caller,
            "chain": call.chain,
            "upstream_request_id": call.upstream_request_id,
            "stream_error": call.stream_error,
            "latency_ms": round(elapsed_ms, 2),
            **audited,
            **(call.limits.fields() if call.limits is not None else {}),
        },
    )


async def _watch_disconnect(receive: Receive, call: Call, scope: anyio.CancelScope) -> None:
    """Cancel the call's work the moment the client goes away.

    A streaming Lambda keeps running, and billing, until it stops reading the
    upstream; a non-streaming call would otherwise wait out a whole generation.
    """
    while (await receive())["type"] != "http.disconnect":
        pass
    call.disconnected = True
    scope.cancel()


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
