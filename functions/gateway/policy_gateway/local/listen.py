"""The ports `serve` and its stand-ins listen on (and `history serve`'s), claimed before
anything starts or is announced.

A port another process holds is a one-line error and a non-zero exit, before
a stand-in starts or a URL is printed: each socket is bound here and handed
to its server (uvicorn, or werkzeug for the embedded AWS), so nothing can take
it in between.
"""

from __future__ import annotations

import errno
import socket

LOOPBACK = "127.0.0.1"


class PortInUse(SystemExit):
    """A port is held by another process; the message says which and how to choose another."""

    def __init__(self, what: str, host: str, port: int, option: str) -> None:
        super().__init__(
            f"policy-gateway serve: {what} port {host}:{port} is in use by another process; "
            f"free it or choose another ({option})"
        )


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # As uvicorn binds: a port whose last connections are in TIME_WAIT is free,
    # one with a listener is not (Linux refuses a second listener's bind).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def claim(what: str, host: str, port: int, option: str) -> socket.socket:
    """A socket bound to host:port for uvicorn to listen on, or PortInUse (a SystemExit)."""
    try:
        return _bound(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(what, host, port, option) from None
        raise SystemExit(
            f"policy-gateway serve: cannot listen on {host}:{port} for the {what}: {exc.strerror}"
        ) from None
