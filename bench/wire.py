"""A minimal HTTP/1.1 client on raw sockets, the same one for direct and gateway calls.

A general-purpose client (httpx, requests) spends more time per call than the
gateway is allowed to add, and its own jitter would blur the p99. This one
does only what the benchmark needs: keep-alive POSTs with a Content-Length
body and GETs, responses framed by Content-Length or chunked encoding, and the moment
the first complete SSE event arrived.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass

_RECV = 256 * 1024
BASE_HEADERS = {
    "content-type": "application/json",
    "x-api-key": "sk-bench",
    "anthropic-version": "2023-06-01",
}
"""Every request's headers, but those a call gives itself (a caller's own `x-api-key`)."""


class ProtocolError(Exception):
    """The server broke HTTP/1.1 framing or closed the connection mid-response."""


@dataclass
class Response:
    status: int
    body: bytes
    seconds: float
    """From the first byte sent to the last byte of the body."""
    first_event_seconds: float | None
    """From the first byte sent to the end of the first SSE event (`\\n\\n`), if any."""
    last_event_seconds: float | None = None
    """From the first byte sent to the end of the last SSE event, if any: what a client that
    stops at `message_stop` waits for (the response may end later: figure (23))."""

    @property
    def events(self) -> int:
        return self.body.count(b"\n\n")


def request_head(
    host: str, port: int, path: str, length: int, extra: dict[str, str], method: str = "POST"
) -> bytes:
    lines = "".join(f"{name}: {value}\r\n" for name, value in {**BASE_HEADERS, **extra}.items())
    return (
        f"{method} {path} HTTP/1.1\r\nhost: {host}:{port}\r\n{lines}"
        f"content-length: {length}\r\n\r\n"
    ).encode("latin-1")


class Connection:
    """One keep-alive connection; `post` blocks until the whole response is read."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._sock = socket.create_connection((host, port), timeout=30)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = bytearray()

    def close(self) -> None:
        self._sock.close()

    def get(self, path: str, headers: dict[str, str] | None = None) -> Response:
        return self.post(path, b"", headers, method="GET")

    def post(
        self, path: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST"
    ) -> Response:
        head = request_head(self.host, self.port, path, len(body), headers or {}, method)
        started = time.perf_counter()
        self._sock.sendall(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self._sock.sendall(body)
        status, length, chunked = self._read_head()
        first_event: float | None = None
        last_event: float | None = None
        if chunked:
            parts: list[bytes] = []
            while True:
                size = int(self._read_line().split(b";")[0], 16)
                if size == 0:
                    self._read_line()
                    break
                part = self._read_exact(size)
                self._read_line()
                parts.append(part)
                if b"\n\n" in b"".join(parts[-2:]):
                    last_event = time.perf_counter() - started
                    if first_event is None:
                        first_event = last_event
            body_in = b"".join(parts)
        else:
            body_in = self._read_exact(length)
            if b"\n\n" in body_in:
                first_event = last_event = time.perf_counter() - started
        return Response(status, body_in, time.perf_counter() - started, first_event, last_event)

    def _fill(self) -> None:
        data = self._sock.recv(_RECV)
        if not data:
            raise ProtocolError("connection closed mid-response")
        self._buffer += data

    def _read_line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            self._fill()
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _read_exact(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _read_head(self) -> tuple[int, int, bool]:
        status = int(self._read_line().split(b" ", 2)[1])
        length = 0
        chunked = False
        while line := self._read_line():
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        return status, length, chunked


def get_status(host: str, port: int, path: str) -> int | None:
    """One GET on a fresh connection; None while nothing listens yet."""
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nhost: {host}:{port}\r\n\r\n".encode())
            data = sock.recv(1024)
    except OSError:
        return None
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None


async def stream_to_end(
    host: str, port: int, path: str, body: bytes, headers: dict[str, str]
) -> int:
    """POST on its own connection and read a chunked response to its end; returns the bytes read.

    Used to hold many streams open at once, so it checks framing only as far
    as finding the terminating chunk.
    """
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request_head(host, port, path, len(body), headers) + body)
        received = bytearray()
        while not received.endswith(b"\r\n0\r\n\r\n"):
            data = await reader.read(_RECV)
            if not data:
                raise ProtocolError("stream closed before its last chunk")
            received += data
        if not received.startswith(b"HTTP/1.1 200"):
            raise ProtocolError(f"stream answered {bytes(received[:12])!r}")
        return len(received)
    finally:
        writer.close()
