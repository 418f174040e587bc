"""The SnapStart hook routes: who may call them, and what a call is answered.

The steps themselves are snapstart.py's; the app runs them on the built gateway
(`app._DeferredGateway.then`).

Who may call the hooks: the adapter POSTs them straight to the app on
loopback (AWS_LWA_HOST, 127.0.0.1 by default), with no header of its own,
while every invocation it forwards carries x-amzn-lambda-context and
x-amzn-request-context, which it sets itself; it also answers 403 to an
invocation for a hook path before forwarding anything. The gateway checks
again: a hook call must come from a loopback address and carry neither
header, else it gets a 403. Outside Lambda the routes answer 404 (as for any
unknown path) unless SNAPSTART_HOOKS=true, which tests and the bench set.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from .errors import error_body

# Set by the adapter on every invocation it forwards, never on its hook calls.
ADAPTER_INVOCATION_HEADERS = (b"x-amzn-lambda-context", b"x-amzn-request-context")


def from_adapter(scope: Scope) -> bool:
    """A hook call as the adapter makes it: from loopback, and not a forwarded invocation."""
    client = scope.get("client")
    try:
        loopback = client is not None and ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        loopback = False
    names = {name for name, _ in scope["headers"]}
    return loopback and not any(header in names for header in ADAPTER_INVOCATION_HEADERS)


class LifecycleHook:
    """One hook route (any method reaches it, so each refusal is this module's to choose)."""

    def __init__(self, name: str, enabled: bool, run: Callable[[], Awaitable[object]]) -> None:
        self._name = name
        self._enabled = enabled
        self._run = run

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        status, message = self._refusal(scope)
        if not status:
            try:
                await self._run()
            except Exception as exc:
                from .observability.logs import logger  # loaded with the gateway, off the cold path

                logger.error(
                    "snapstart hook failed",
                    extra={"hook": self._name, "error_type": type(exc).__name__},
                )
                status, message = 503, f"The {self._name} hook failed; see the gateway's logs."
        if status:
            response = JSONResponse(error_body(status, message), status_code=status)
        else:
            response = JSONResponse({"status": "ok", "hook": self._name})
        await response(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str]:
        method, path = scope["method"], scope["path"]
        if not self._enabled:
            return 404, f"Not found: {method} {path}"
        if method != "POST":
            return 405, f"Method {method} is not allowed on {path}"
        if not from_adapter(scope):
            return 403, f"{path} is the Lambda Web Adapter's SnapStart hook."
        return 0, ""
