"""The ASGI app: the same object serves Lambda (behind the Web Adapter), `serve` and tests.

Only three routes exist. Anything else gets an Anthropic-shaped error, so no
path can reach the upstream without passing the policy chain.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .errors import error_body
from .settings import Settings

if TYPE_CHECKING:
    from .pipeline import Gateway


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Not found: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}"
    else:
        message = exc.detail
    return JSONResponse(error_body(exc.status_code, message), status_code=exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    from .logs import logger  # loaded with the gateway, off the cold path

    logger.error("unexpected error", extra={"error_type": type(exc).__name__})
    return JSONResponse(error_body(500, "Internal gateway error."), status_code=500)


def _build_gateway(config: Settings) -> Gateway:
    from .auth import authenticator
    from .flag import FallbackFlag
    from .pipeline import Gateway
    from .policy_source import PolicySource
    from .relay import Relay

    return Gateway(
        config=config,
        relay=Relay(config),
        flag=FallbackFlag(config.flag_parameter, config.flag_ttl, clock=config.clock),
        policies=PolicySource(
            config.policy_config,
            config.policy_config_parameter,
            config.policy_config_ttl,
            clock=config.clock,
        ),
        auth=authenticator(config),
    )


class _DeferredGateway:
    """The gateway, built in a worker thread while the server comes up.

    Building it imports httpx2, Powertools and the configured policies (with
    pydantic for most of them): over 100 ms that would otherwise stand
    between process start and the Lambda Web Adapter's readiness check. The
    build starts at lifespan startup, so it runs while the adapter polls
    /healthz and the first invocation is on its way; the first call awaits
    whatever is left of it, later calls find it done.
    """

    def __init__(self, config: Settings) -> None:
        self._config = config
        self._built: asyncio.Future[Gateway] | None = None

    def start(self) -> asyncio.Future[Gateway]:
        if self._built is None:
            loop = asyncio.get_running_loop()
            self._built = loop.run_in_executor(None, _build_gateway, self._config)
        return self._built

    async def get(self) -> Gateway:
        # Shielded: a cancelled call must not cancel the build the others await.
        return await asyncio.shield(self.start())

    @property
    def failed(self) -> bool:
        built = self._built
        return built is not None and built.done() and built.exception() is not None

    async def aclose(self) -> None:
        if self._built is not None:
            await (await self.get()).relay.aclose()

    def endpoint(self, name: str) -> MessagesRoute:
        return MessagesRoute(self, name)


class MessagesRoute:
    """ASGI endpoint that hands each call to the pipeline once the gateway is built."""

    def __init__(self, deferred: _DeferredGateway, endpoint: str) -> None:
        self._deferred = deferred
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from .pipeline import MessagesEndpoint

        await MessagesEndpoint(await self._deferred.get(), self._endpoint)(scope, receive, send)


def create_app(config: Settings | None = None) -> Starlette:
    config = config or Settings.from_env()
    gateway = _DeferredGateway(config)

    async def healthz(request: Request) -> Response:
        # Ready while the build runs (the first call waits for it), but never
        # ready once it failed: the adapter's readiness check must not pass
        # a gateway that can only answer 500.
        if gateway.failed:
            return JSONResponse(
                error_body(503, "The gateway failed to start; see its logs."), status_code=503
            )
        return JSONResponse({"status": "ok"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gateway.start()
        yield
        await gateway.aclose()

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/v1/messages", gateway.endpoint("messages"), methods=["POST"]),
            Route(
                "/v1/messages/count_tokens",
                gateway.endpoint("count_tokens"),
                methods=["POST"],
            ),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _unexpected},
        lifespan=lifespan,
    )
