"""Which headers cross the gateway, in each direction.

Upstream: everything the client sent (so new `anthropic-*` headers keep
working) except hop-by-hop headers, Host (httpx sets the upstream's), the body
framing (recomputed), and the adapter's and Function URL's own `x-amzn-*` and
`x-forwarded-*` headers. Downstream: the upstream's headers (`request-id`,
`anthropic-ratelimit-*`, `retry-after`, ...) minus hop-by-hop and framing.
"""

from __future__ import annotations

from collections.abc import Iterable

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_UPSTREAM = _HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}
_NOT_DOWNSTREAM = _HOP_BY_HOP | {"content-length", "content-encoding", "date", "server"}
_PLATFORM_PREFIXES = ("x-amzn-", "x-forwarded-", "x-amz-")


def upstream_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key_bytes, value_bytes in raw:
        key = key_bytes.decode("latin-1").lower()
        if key in _NOT_UPSTREAM or key.startswith(_PLATFORM_PREFIXES):
            continue
        out.append((key, value_bytes.decode("latin-1")))
    return out


def downstream_headers(raw: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [
        (key.lower().encode("latin-1"), value.encode("latin-1"))
        for key, value in raw
        if key.lower() not in _NOT_DOWNSTREAM
    ]
