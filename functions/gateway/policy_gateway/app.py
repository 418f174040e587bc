"""The ASGI app: the same object serves Lambda (behind the Web Adapter), `serve` and tests.

Only the routes listed here exist (`surface.py` lists the API's, and what
each one gets). Anything else gets an Anthropic-shaped error, so no path can
reach the upstream without passing the policy chain or being passed through
on purpose; and no request a web page made reaches any route (auth/web_pages.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from importlib import import_module
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from . import settings, surface
from .auth.web_pages import RefuseWebPages
from .errors import error_body
from .lifecycle import LifecycleHook
from .observability import tracing, tracing_settings
from .settings import Settings

if TYPE_CHECKING:
    from .routes.endpoint import GatewayEndpoint
    from .routes.gateway import Gateway


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Not found: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}"
    else:
        message = exc.detail
    return JSONResponse(error_body(exc.status_code, message), status_code=exc.status_code)


class _NotOnBedrock:
    """An Anthropic-only route under UPSTREAM_PROVIDER=bedrock: answered here, before any
    key is read, so the client's credentials go nowhere. An ASGI app rather than a
    function, so that Starlette keeps the route's own methods (all, for the Files API)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = (
            f"{scope['method']} {scope['path']} is not available with the Bedrock provider "
            f"({settings.ENV_UPSTREAM_PROVIDER}={settings.PROVIDER_BEDROCK}): Amazon Bedrock "
            "offers only /v1/messages and /v1/messages/count_tokens."
        )
        await JSONResponse(error_body(404, message), status_code=404)(scope, receive, send)


async def _unexpected(request: Request, exc: Exception) -> Response:
    from .observability.logs import logger

    logger.error("unexpected error", extra={"error_type": type(exc).__name__})
    return JSONResponse(error_body(500, "Internal gateway error."), status_code=500)


def _build_gateway(config: Settings, clock: Callable[[], float]) -> Gateway:
    from gateway_policies.detect import memo

    from .auth.authenticator import authenticator
    from .auth.upstream_key import upstream_key
    from .fallback import budget
    from .fallback.flag import FallbackFlag
    from .fallback.send import Fallback
    from .limits.limiter import limiter
    from .parameter_batch import ParameterBatch
    from .policy_source import PolicySource
    from .records.store import open_store
    from .records.writer import RecordWriter
    from .routes.gateway import Gateway
    from .upstream.client import UpstreamClient

    tracing.setup()
    memo.configure(config.policy_memo_bytes)
    key = upstream_key(config)
    # The flag and the chain: one GetParameters call per refresh of both.
    reads = ParameterBatch(config.parameters_ttl, config.clock)
    limits = limiter(config, clock)
    store = open_store(config.records_bucket, config.records_dir)
    return Gateway(
        config=config,
        upstream=UpstreamClient(config),
        fallback=Fallback(
            FallbackFlag(config.flag_parameter, reads), budget.from_settings(config, clock)
        ),
        policies=PolicySource(
            config.policy_config,
            config.policy_config_parameter,
            reads,
            limits_store=limits.label,
            records_configured=store is not None,
        ),
        auth=authenticator(config, key, clock),
        upstream_key=key,
        limits=limits,
        records=None if store is None else RecordWriter(store),
    )


async def _ready_gateway(config: Settings, clock: Callable[[], float]) -> Gateway:
    loop = asyncio.get_running_loop()
    gateway = await loop.run_in_executor(None, _build_gateway, config, clock)
    await gateway.warm()
    return gateway


class _DeferredGateway:
    """The gateway, built in a worker thread while the server comes up, then warmed.

    Building it imports httpx2, Powertools, the configured policies (with
    pydantic for most of them) and, with tracing on, OpenTelemetry, and
    creates the upstream client; warming it makes the AWS reads a first call
    would make (`Gateway.warm`). Both start at lifespan startup, so the
    server answers /healthz at once (503 until they are done): the Lambda Web
    Adapter keeps polling until it gets a 200, so Lambda's init phase, not the
    first user's request, pays for start-up. A call that arrives earlier
    (outside Lambda) awaits whatever is left. Outside Lambda the chain and the
    flag are then kept fresh between calls (`PolicySource.keep_fresh`).
    """

    def __init__(self, config: Settings, clock: Callable[[], float]) -> None:
        self._config = config
        self._clock = clock
        self._built: asyncio.Task[Gateway] | None = None
        self._refreshing: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[Gateway]:
        if self._built is None:
            self._built = asyncio.ensure_future(_ready_gateway(self._config, self._clock))
            if self._config.refresh_in_background:
                self._refreshing = asyncio.ensure_future(self._keep_fresh())
        return self._built

    async def _keep_fresh(self) -> None:
        # A failed build is /healthz's to report; there is then nothing to refresh.
        built = self.start()
        await asyncio.wait({built})
        if built.exception() is None:
            await built.result().policies.keep_fresh()

    async def get(self) -> Gateway:
        # Shielded: a cancelled call must not cancel the build the others await.
        return await asyncio.shield(self.start())

    def then(self, step: Callable[[Gateway], Awaitable[Gateway]]) -> asyncio.Task[Gateway]:
        """Serve what `step` makes of the gateway; until then /healthz is 503 and calls wait."""
        self._built = asyncio.ensure_future(_stepped(self.start(), step))
        return self._built

    async def before_checkpoint(self) -> None:
        from .snapstart import before_checkpoint

        await self.then(before_checkpoint)

    async def after_restore(self) -> None:
        from .snapstart import after_restore

        await self.then(partial(after_restore, clock=self._clock))

    @property
    def ready(self) -> bool:
        built = self._built
        return built is not None and built.done() and built.exception() is None

    @property
    def failed(self) -> bool:
        built = self._built
        return built is not None and built.done() and built.exception() is not None

    async def aclose(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
            await asyncio.wait({self._refreshing})
        if self._built is not None:
            built = await self.get()
            # What this environment counted and has not reported yet (ledger.py).
            await built.limits.flush()
            await built.upstream.aclose()

    def endpoint(
        self, name: str, handler: str = "routes.messages:MessagesEndpoint"
    ) -> GatewayRoute:
        return GatewayRoute(self, name, handler)


async def _stepped(
    previous: asyncio.Future[Gateway], step: Callable[[Gateway], Awaitable[Gateway]]
) -> Gateway:
    return await step(await previous)


class GatewayRoute:
    """ASGI endpoint that hands each call to its handler once the gateway is built.

    `handler` is `module:Class` within this package, imported on the first
    call so that no route's code weighs on the cold start.
    """

    def __init__(self, deferred: _DeferredGateway, endpoint: str, handler: str) -> None:
        self._deferred = deferred
        self._endpoint = endpoint
        self._handler = handler
        self._class: type[GatewayEndpoint] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._class is None:
            module, _, name = self._handler.partition(":")
            self._class = getattr(import_module(f".{module}", __package__), name)
        gateway = await self._deferred.get()
        await self._class(gateway, self._endpoint)(scope, receive, send)


def create_app(config: Settings | None = None, clock: Callable[[], float] = time.time) -> Starlette:
    """The app; `clock` (wall-clock seconds) decides the budget's window and keys' expiry.

    Raises tracing_settings.ExporterMissing rather than serve a gateway whose build must fail.
    """
    tracing_settings.check_exporter()
    config = config or Settings.from_env()
    gateway = _DeferredGateway(config, clock)

    async def healthz(request: Request) -> Response:
        # Ready only once a call would find everything built and read; never
        # once the build failed: the adapter's readiness check must not pass
        # a gateway that can only answer 500.
        if gateway.ready:
            return JSONResponse({"status": "ok"})
        message = (
            "The gateway failed to start; see its logs."
            if gateway.failed
            else "The gateway is starting; try again shortly."
        )
        return JSONResponse(error_body(503, message), status_code=503)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gateway.start()
        yield
        await gateway.aclose()

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route(
                config.snapstart_before_checkpoint_path,
                LifecycleHook(
                    "before-checkpoint", config.snapstart_hooks, gateway.before_checkpoint
                ),
            ),
            Route(
                config.snapstart_after_restore_path,
                LifecycleHook("after-restore", config.snapstart_hooks, gateway.after_restore),
            ),
            *(
                Route(
                    route.path,
                    gateway.endpoint(route.endpoint, route.handler)
                    if surface.offered_by_bedrock(route) or not config.bedrock
                    else _NotOnBedrock(),
                    methods=list(route.methods) if route.methods else None,
                )
                for route in surface.ROUTES
            ),
        ],
        middleware=[Middleware(RefuseWebPages, hosts=config.local_hosts)],
        exception_handlers={HTTPException: _http_error, Exception: _unexpected},
        lifespan=lifespan,
    )
    # Starlette would answer `/v1/messages/` with a 307 whose Location comes
    # from the client's Host header; an unknown path is a plain 404 instead.
    app.router.redirect_slashes = False
    return app
