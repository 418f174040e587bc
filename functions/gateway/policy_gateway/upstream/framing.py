"""Pooled upstream connections that never hand one call's leftover bytes to the next.

An upstream answer whose framing lies (a `content-length` shorter than the
body it sent, bytes after a chunked body's end) leaves the rest in the
connection's receive buffer. HTTP/1.1 has no request id: once the connection
is back in the pool, the next request sent on it, another caller's, would take
those bytes for its own answer. httpcore2 probes an idle connection's socket
before reusing it, but bytes the HTTP parser already holds are invisible to
that probe.

So every connection's socket is wrapped (`GuardedBackend`): it notes whether
anything was read since the last request went out. An answer whose head
arrived with nothing read after its request was written was already waiting
in the buffer before the question: `check` refuses it as a protocol error
(retried on a fresh connection like any reset) and the connection is marked
so the pool drops it instead of lending it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2

_NETWORK_STREAM = "network_stream"
_IS_READABLE = "is_readable"


class GuardedStream(httpcore2.AsyncNetworkStream):
    """A connection's socket that knows whether the upstream spoke since it was last asked.

    The `timeout` parameters are httpcore2's interface (ASYNC109 would have a scope).
    """

    def __init__(self, stream: httpcore2.AsyncNetworkStream) -> None:
        self._stream = stream
        self.heard_since_asked = False
        self.poisoned = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        data = await self._stream.read(max_bytes, timeout)
        if data:
            self.heard_since_asked = True
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self.heard_since_asked = False
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore2.AsyncNetworkStream:
        return GuardedStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        # A poisoned connection reads as a server's hang-up: the pool's
        # expiry check then closes it instead of lending it again.
        if info == _IS_READABLE and self.poisoned:
            return True
        return self._stream.get_extra_info(info)


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """The default network backend, its connections wrapped in `GuardedStream`."""

    def __init__(self) -> None:
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return GuardedStream(
            await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return GuardedStream(await self._backend.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def guarded_transport(ssl_context: Any, limits: httpx2.Limits) -> httpx2.AsyncHTTPTransport:
    """httpx2's transport on a pool whose connections are guarded.

    httpx2's transport takes no network backend, so its pool is replaced by
    the same pool built with one (the only private name this module touches).
    """
    transport = httpx2.AsyncHTTPTransport(verify=ssl_context, limits=limits)
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=ssl_context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=GuardedBackend(),
    )
    return transport


def check(response: httpx2.Response, request: httpx2.Request) -> None:
    """Refuse an answer that was in the connection's buffer before its request was sent."""
    stream = response.extensions.get(_NETWORK_STREAM)
    if isinstance(stream, GuardedStream) and not stream.heard_since_asked:
        stream.poisoned = True
        raise httpx2.RemoteProtocolError(
            "the upstream's answer arrived before its request was sent", request=request
        )
