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

A page can also reach a local gateway without either mark: after a DNS
rebinding its own name resolves to loopback, and a browser without Fetch
Metadata sends neither header on its same-origin GET. Its `Host` is still the
page's name, so `serve` on loopback outside Lambda answers only a `Host`
naming the address it listens on (`loopback_hosts`). In Lambda the adapter
forwards calls with the Function URL's Host, so there the check is off.
"""

from __future__ import annotations

import ipaddress

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import error_body

REFUSAL = (
    "Requests from web pages are refused: the gateway serves API clients (the SDKs, "
    "Claude Code, curl), and a browser request carries Origin or Sec-Fetch-Site."
)
FOREIGN_HOST = (
    "The local gateway answers only requests whose Host names the loopback address it "
    "listens on (a web page's DNS rebinding names its own)."
)
LOCALHOST = "localhost"
_USER_TYPED = "none"
_SAME_ORIGIN = "same-origin"
_ORIGIN = b"origin"
_FETCH_SITE = b"sec-fetch-site"
_HOST = b"host"
_HTTP_DEFAULT_PORT = 80


def loopback_hosts(host: str, port: int) -> frozenset[str]:
    """The `Host` values that name a server listening on host:port, when host is a
    loopback address or localhost; empty (no check) otherwise."""
    if host.lower() == LOCALHOST:
        names = {LOCALHOST, "127.0.0.1", "[::1]"}
    else:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return frozenset()
        if not address.is_loopback:
            return frozenset()
        names = {LOCALHOST, f"[{address}]" if address.version == 6 else str(address)}
    # A client omits the port it connects to when it is HTTP's default.
    suffixes = {f":{port}", ""} if port == _HTTP_DEFAULT_PORT else {f":{port}"}
    return frozenset(name + suffix for name in names for suffix in suffixes)


def made_by_a_web_page(
    origin: str | None, fetch_site: str | None, own_origins: frozenset[str] = frozenset()
) -> bool:
    """Whether a browser marked the request as a page's, from its `Origin` and
    `Sec-Fetch-Site` headers (None when absent); with `own_origins` (a server that has
    pages of its own: `history serve`), the requests its own pages make are not."""
    if origin is not None:
        return origin.lower() not in own_origins
    if fetch_site is None:
        return False
    site = fetch_site.strip().lower()
    return site != _USER_TYPED and not (own_origins and site == _SAME_ORIGIN)


class RefuseWebPages:
    """ASGI middleware: a page's request gets `403 permission_error` before any route;
    with `hosts` (Settings.local_hosts), so does one whose Host is none of them."""

    def __init__(
        self,
        app: ASGIApp,
        hosts: frozenset[str] = frozenset(),
        own_origins: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.own_origins = own_origins

    def refusal(self, scope: Scope) -> str | None:
        """Why the request is refused, or None to serve it."""
        marks = {
            name: value.decode("latin-1")
            for name, value in scope["headers"]
            if name in (_ORIGIN, _FETCH_SITE, _HOST)
        }
        if made_by_a_web_page(marks.get(_ORIGIN), marks.get(_FETCH_SITE), self.own_origins):
            return REFUSAL
        if self.hosts and marks.get(_HOST, "").lower() not in self.hosts:
            return FOREIGN_HOST
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.refusal(scope) if scope["type"] == "http" else None
        if refused is None:
            await self.app(scope, receive, send)
            return
        await JSONResponse(error_body(403, refused), status_code=403)(scope, receive, send)
