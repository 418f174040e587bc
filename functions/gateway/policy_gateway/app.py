"""The ASGI app: the same object serves Lambda (behind the Web Adapter), `serve` and tests.

Only three routes exist. Anything else gets an Anthropic-shaped error, so no
path can reach the upstream without passing the policy chain.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .auth import authenticator
from .errors import error_body
from .flag import FallbackFlag
from .logs import logger
from .pipeline import Gateway, MessagesEndpoint
from .policy_source import PolicySource
from .relay import Relay
from .settings import Settings


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


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
    logger.error("unexpected error", extra={"error_type": type(exc).__name__})
    return JSONResponse(error_body(500, "Internal gateway error."), status_code=500)


def create_app(config: Settings | None = None) -> Starlette:
    config = config or Settings.from_env()
    gateway = Gateway(
        config=config,
        relay=Relay(config),
        flag=FallbackFlag(config.flag_parameter, config.flag_ttl),
        policies=PolicySource(
            config.policy_config, config.policy_config_parameter, config.policy_config_ttl
        ),
        auth=authenticator(config),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await gateway.relay.aclose()

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/v1/messages", MessagesEndpoint(gateway, "messages"), methods=["POST"]),
            Route(
                "/v1/messages/count_tokens",
                MessagesEndpoint(gateway, "count_tokens"),
                methods=["POST"],
            ),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _unexpected},
        lifespan=lifespan,
    )
