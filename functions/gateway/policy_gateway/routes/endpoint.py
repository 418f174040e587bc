"""The shell of every gateway route: the call's id and log line, auth, the body, the disconnect.

An explicit ASGI endpoint, so the moment the client sees a status line is
ours to choose. Subclasses say how the body is read (`_read`) and what reaches
the upstream (`_proxy`); the call's bookkeeping, metrics and error answers are
the same on every route. The Messages API's own way through is messages.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

import anyio
from gateway_policies import PolicyChain, PolicyContext
from starlette.types import Receive, Scope, Send

from .. import lambda_context, names, settings
from ..auth.authenticator import Authenticator, path_for_spans
from ..auth.caller import identify
from ..auth.upstream_key import UpstreamKey
from ..call import DEADLINE_ERROR, FALLBACK_FAILED, FALLBACK_RETRYING, Call
from ..errors import GatewayError
from ..fallback.send import Fallback
from ..headers import HeaderLookup, forwarded_headers
from ..observability import audit, metrics, tracing
from ..observability.logs import bind_call_key, call_context, logger
from ..policy_source import PolicySource
from ..upstream.client import Tries, UpstreamClient, UpstreamResponse
from ..upstream.errors import UpstreamStatusError, UpstreamUnavailable
from .body import check_content_encoding, check_content_type, read_body


@dataclass
class Gateway:
    """Everything a call needs that outlives it."""

    config: settings.Settings
    upstream: UpstreamClient
    fallback: Fallback
    policies: PolicySource
    auth: Authenticator
    upstream_key: UpstreamKey | None

    def policy_context(
        self, call: Call, *, endpoint: str = "messages", kept: bool = True
    ) -> PolicyContext:
        """A fresh context for one run of the chain (one request, one batch entry, one result),
        naming the call's caller and groups, kept on the call so its actions reach the call's
        log line (unless `kept` is False: the caller then keeps it once it holds actions).

        Not streaming: the Messages route says so once it has parsed the body.
        """
        key = self.upstream_key
        ctx = PolicyContext(
            endpoint=endpoint,
            stream=False,
            call_id=call.call_id,
            upstream_api_key=None if key is None else key.get,
            caller=call.caller,
            caller_groups=call.caller_groups,
        )
        if kept:
            call.contexts.append(ctx)
        return ctx

    async def chain(self, call: Call) -> PolicyChain:
        """The call's chain (its caller's, its group's or the default), its name and the
        document's version noted for its log line; a 500 when no document ever loaded."""
        loaded = await self.policies.loaded()
        chain = loaded.document.resolve(call.caller, call.caller_groups)
        call.chain_version = loaded.version
        call.chain = chain.name
        return chain

    async def warm(self) -> None:
        """Make the AWS reads a first call would otherwise make, so that init pays for them.

        The policy document (from SSM when configured so), the fallback flag when a
        fallback is possible (one of its chains has request hooks), and the secrets in
        `gateway_key` mode. Each read is bounded (`parameters.READ_DEADLINE_SECONDS`)
        and a failed one is handled as on any call: a gateway whose chain could
        not load is ready to refuse calls, exactly as it would after start-up.
        """
        await asyncio.gather(self.auth.warm(), self._warm_policies())

    async def _warm_policies(self) -> None:
        document = await self.policies.load()
        if document is not None and any(chain.has_request_hooks for chain in document.chains):
            await self.fallback.flag.enabled()


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
        if call.disconnected:
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

    async def _send(
        self,
        call: Call,
        body: bytes,
        label: str,
        *,
        stream: bool,
        headers: Sequence[tuple[str, str]] | None = None,
        method: str = "POST",
    ) -> UpstreamResponse:
        """Send one body upstream for the call, retries included: every route's one way there.

        The call's log line counts each request that went upstream and names
        the last answer's request id, whether the upstream accepted or refused.
        """
        tries = Tries()
        try:
            upstream = await self._gateway.upstream.attempt(
                upstream_path(call),
                body,
                call.forwarded if headers is None else headers,
                stream=stream,
                label=label,
                deadline=call.deadline,
                method=method,
                tries=tries,
            )
        except UpstreamStatusError as error:
            call.upstream_request_id = call.credentials.scrub_text(error.request_id)
            raise
        finally:
            call.attempts += tries.count
        call.upstream_request_id = call.credentials.scrub_text(upstream.request_id)
        return upstream

    async def _reach(
        self, call: Call, reaching: Awaitable[UpstreamResponse], *, read: bool
    ) -> tuple[UpstreamResponse, bytes] | None:
        """Await `reaching` (the route's sends) within the deadline; the answer, or None
        once its error was sent.

        With `read`, the whole body comes back too (it is b"" otherwise). An
        upstream status error goes to the client as the upstream said it, with
        this call's credentials scrubbed from it.
        """
        body = b""
        try:
            # The deadline covers the wait for the upstream's answer too: a
            # slow first byte must not outlive the Lambda invocation either.
            with anyio.move_on_after(call.seconds_left()) as budget:
                upstream = await reaching
                if read:
                    try:
                        body = await upstream.read()
                    finally:
                        upstream.span.end()
        except UpstreamStatusError as error:
            error.span.end()
            await call.respond(
                error.status, call.credentials.scrub(error.client_body), error.headers
            )
            return None
        except UpstreamUnavailable as exc:
            raise GatewayError(504 if exc.timeout else 502, str(exc)) from None
        if budget.cancelled_caught:
            raise GatewayError(*DEADLINE_ERROR)
        return upstream, body


def _route(scope: Scope) -> str | None:
    """The path template of the route the call matched (Starlette's router records it)."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    return template if isinstance(template, str) else None


def upstream_path(call: Call) -> str:
    """The path (and query) the upstream gets: the client's, minus any credential."""
    path: str = call.scope["path"]
    if call.scope.get("query_string"):
        # A credential never travels upstream in the URL either (a client
        # that put its gateway key there would hand it to Anthropic).
        path += "?" + call.credentials.scrub_query(call.scope["query_string"]).decode("latin-1")
    return path


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
            "latency_ms": round(elapsed_ms, 2),
            **audited,
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
