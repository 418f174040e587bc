"""Routes passed through on purpose: no policy has anything to judge there.

The Models API lists and describes models; the Files API (only when the
operator sets ALLOW_FILES_API=true) stores files no policy can read. Both
go upstream as the client sent them (method, path, query, body and its
content type) with the call's upstream credentials, and come back as the
upstream sent them, streamed chunk by chunk, so a large download never sits
in the gateway's memory.

`BodyRelay` is that streaming half, shared with the batch results route,
which runs each line through the response policies on the way.
"""

from __future__ import annotations

import re
from typing import Protocol

import anyio
from starlette.types import Receive, Scope

from .. import names, settings
from ..call import DEADLINE_ERROR, Call
from ..errors import GatewayError, error_bytes
from ..headers import HeaderLookup, with_content_type
from ..observability.logs import logger
from ..upstream.client import UpstreamResponse
from ..upstream.errors import UpstreamUnavailable
from .body import check_content_encoding, read_body
from .endpoint import GatewayEndpoint
from .upstream_answer import reach

_FILES_REFUSED = (
    "The Files API is turned off on this gateway: no policy can see an uploaded file, and a "
    f"later message could reference it by id. The operator can set {settings.ENV_ALLOW_FILES_API}"
    "=true to pass it through (a bypass of the policies for file contents)."
)


# An id segment: no dot segments, no empty segments, nothing that needs escaping.
_SEGMENT = re.compile(r"[A-Za-z0-9_~:@+=-][A-Za-z0-9._~:@+=-]*")


class BodyWithheld(Exception):
    """A body filter refuses to pass what it read: the rest of the body is withheld."""


class BodyFilter(Protocol):
    """Turns the upstream body, chunk by chunk, into what the client gets."""

    async def feed(self, chunk: bytes) -> bytes: ...

    async def end(self) -> bytes: ...


class PassthroughEndpoint(GatewayEndpoint):
    """Forward the call unread and relay the answer as it arrives."""

    buffered = False
    """Whether the answer is read whole (a small JSON object to rewrite) rather than streamed."""
    _content_type: bytes | None = None

    async def _read(self, receive: Receive, header: HeaderLookup) -> bytes:
        # Any content type: the body is forwarded, never parsed or judged. Not compressed,
        # though: Content-Encoding never goes upstream (headers.py).
        check_content_encoding(header(b"content-encoding"))
        self._content_type = header(b"content-type")
        return await read_body(receive, header(b"content-length"))

    async def _proxy(self, call: Call) -> None:
        _check_path_params(call.scope)
        sending = self._gateway.send(
            call,
            call.original,
            names.LABEL_PASSTHROUGH,
            stream=not self.buffered,
            headers=with_content_type(call.forwarded, self._content_type),
            method=call.scope["method"],
        )
        reached = await reach(call, sending, read=self.buffered)
        if reached is not None:
            await self._deliver(call, *reached)

    async def _deliver(self, call: Call, upstream: UpstreamResponse, body: bytes) -> None:
        await BodyRelay(upstream, call).run()


class FilesEndpoint(PassthroughEndpoint):
    """The Files API: refused (403) unless ALLOW_FILES_API=true, then passed through unmodified."""

    async def _read(self, receive: Receive, header: HeaderLookup) -> bytes:
        # Refused before the body is read: an upload can be megabytes.
        if not self._gateway.config.allow_files_api:
            raise GatewayError(403, _FILES_REFUSED, "permission_error")
        return await super()._read(receive, header)


def _check_path_params(scope: Scope) -> None:
    """Refuse ids the upstream would read as another path (`..`, empty segments): the upstream
    must be asked for the very resource the route matched."""
    for value in scope.get("path_params", {}).values():
        if not all(_SEGMENT.fullmatch(part) for part in str(value).split("/")):
            raise GatewayError(404, f"Not found: {scope['method']} {scope['path']}")


class BodyRelay:
    """Send one upstream body to the client as it arrives, through an optional filter.

    The status line goes out with the first bytes. A failure before that
    (the filter withholds the first line, the upstream resets, the deadline
    comes) is an Anthropic-shaped error with its own status; after it, the
    response is cut without its final chunk, so the client's read fails
    instead of ending on a silently shorter body.
    """

    def __init__(self, upstream: UpstreamResponse, call: Call) -> None:
        self.upstream = upstream
        self.call = call
        self.committed = False

    async def run(self, body_filter: BodyFilter | None = None) -> None:
        failure: tuple[int, str, str | None] | None = None
        try:
            with anyio.move_on_after(self.call.seconds_left()) as budget:
                try:
                    await self._pump(body_filter)
                except BodyWithheld as exc:
                    failure = (502, str(exc), "api_error")
                except UpstreamUnavailable as exc:
                    failure = (
                        (504, "The upstream body stalled.", "timeout_error")
                        if exc.timeout
                        else (502, "The upstream body ended unexpectedly.", "api_error")
                    )
                except OSError:
                    self.call.disconnected = True
                    return
            if budget.cancelled_caught:
                failure = DEADLINE_ERROR
        finally:
            await self.upstream.close()
            self.upstream.span.end()
        if failure is None:
            await self._body(b"", more=False)
            return
        status, message, kind = failure
        if not self.committed:
            await self.call.respond(status, error_bytes(status, message, kind))
            return
        logger.warning(
            "response body cut after it started",
            extra={"fault_status": status, "fault": kind, "reason": message},
        )

    async def _pump(self, body_filter: BodyFilter | None) -> None:
        async for chunk in self.upstream.chunks():
            out = chunk if body_filter is None else await body_filter.feed(chunk)
            if out:
                await self._body(out, more=True)
        if body_filter is not None:
            tail = await body_filter.end()
            if tail:
                await self._body(tail, more=True)

    async def _body(self, data: bytes, *, more: bool) -> None:
        if not self.committed:
            self.committed = True
            self.call.status = self.upstream.status
            await self.call.send(
                {
                    "type": "http.response.start",
                    "status": self.upstream.status,
                    "headers": self.upstream.headers,
                }
            )
        await self.call.send({"type": "http.response.body", "body": data, "more_body": more})
