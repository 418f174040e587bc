"""Requests a web page made are refused, wherever the gateway runs.

A browser marks what a page sends: `Origin` on every cross-origin request and
on every POST, `Sec-Fetch-Site` on every request to a loopback or HTTPS
address (`none` only for what the user typed or bookmarked, no page's doing).
Neither needs the page to read the answer, so without this a page the
developer opens could make a cross-site `text/plain` POST that `serve` would
forward, spending whatever key or AWS identity the gateway holds. No client
the gateway serves sends either mark: the SDKs, Claude Code and curl are not
browsers, and a browser can use the gateway nowhere, since it grants no CORS.

Refused in Lambda too (docs/security.md, "Web pages"): a Function URL is just
as reachable from a page, which gateway runs are local cannot be told (`serve`
also runs in containers), and the rule costs a supported client nothing.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import error_body

REFUSAL = (
    "Requests from web pages are refused: the gateway serves API clients (the SDKs, "
    "Claude Code, curl), and a browser request carries Origin or Sec-Fetch-Site."
)
_USER_TYPED = "none"
_ORIGIN = b"origin"
_FETCH_SITE = b"sec-fetch-site"


def made_by_a_web_page(origin: str | None, fetch_site: str | None) -> bool:
    """Whether a browser marked the request as a page's, from its `Origin` and
    `Sec-Fetch-Site` headers (None when absent)."""
    if origin is not None:
        return True
    return fetch_site is not None and fetch_site.strip().lower() != _USER_TYPED


class RefuseWebPages:
    """ASGI middleware: a page's request gets `403 permission_error` before any route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            marks = {
                name: value.decode("latin-1")
                for name, value in scope["headers"]
                if name in (_ORIGIN, _FETCH_SITE)
            }
            if made_by_a_web_page(marks.get(_ORIGIN), marks.get(_FETCH_SITE)):
                refusal = JSONResponse(error_body(403, REFUSAL), status_code=403)
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
