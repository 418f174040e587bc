"""Which headers cross the gateway, in each direction.

Upstream: everything the client sent (so new `anthropic-*` headers keep
working) except hop-by-hop headers (the fixed list and any the `Connection`
header names), Host (httpx sets the upstream's), the body framing
(recomputed; bodies are never
compressed, see body.py), and the adapter's and Function URL's own `x-amzn-*` and
`x-forwarded-*` headers. Content-Type is always `application/json`: the
gateway forwards only bodies it parsed as a JSON object, and the upstream must
read them as the same JSON the policies saw; a route passed through unread
(Models, Files) keeps the client's own. Downstream: the upstream's headers
(`request-id`, `anthropic-ratelimit-*`, `retry-after`, ...) minus hop-by-hop
and framing, minus `Location` (a client that followed an upstream's redirect
would send its request around the gateway: upstream/client.py answers a 3xx as
a 502), and minus any value that is not a valid ASCII field value (an
upstream's `x-note: €` must not fail the call it came with).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from .errors import GatewayError

HeaderLookup = Callable[[bytes], bytes | None]
"""A request header's value by its lower-case name, or None: `dict(scope["headers"]).get`."""

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
_NOT_UPSTREAM = _HOP_BY_HOP | {
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "accept-encoding",
    "expect",
}
_CREDENTIAL_HEADERS = frozenset({"x-api-key", "authorization"})
RELIED_ON = _CREDENTIAL_HEADERS | {
    "anthropic-version",
    "anthropic-beta",
    "content-type",
    "content-length",
    "content-encoding",
    "host",
    "x-amzn-lambda-context",
    "x-amzn-request-context",
    "x-amzn-trace-id",
    "traceparent",
    "tracestate",
}
"""End-to-end headers a `Connection` header may not name (a 401 if it does)."""
# RFC 9110 field-value: visible ASCII, with spaces and tabs only between them.
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20\x21-\x7e\t]*[\x21-\x7e])?)?")
_NOT_DOWNSTREAM = _HOP_BY_HOP | {
    "content-length",
    "content-encoding",
    "date",
    "server",
    "location",
}
_PLATFORM_PREFIXES = ("x-amzn-", "x-forwarded-", "x-amz-")


def _connection_named(pairs: list[tuple[str, str]]) -> set[str]:
    """Headers that `Connection` declares hop-by-hop for this one connection."""
    return {
        token.strip().lower()
        for key, value in pairs
        if key == "connection"
        for token in value.split(",")
    }


def _refuse_relied_on(named: set[str]) -> None:
    relied_on = sorted(named & RELIED_ON)
    if relied_on:
        raise GatewayError(
            401,
            f"The Connection header may not name {', '.join(relied_on)}.",
            "authentication_error",
        )


def _ascii(value: bytes) -> str:
    """A header value the upstream client can send: HTTP/1.1 header values are ASCII here."""
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        raise GatewayError(400, "A request header value is not ASCII.") from None


def upstream_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    pairs = [(key.decode("latin-1").lower(), _ascii(value)) for key, value in raw]
    named = _connection_named(pairs)
    _refuse_relied_on(named)
    dropped = _NOT_UPSTREAM | named
    out = [
        (key, value)
        for key, value in pairs
        if key not in dropped and not key.startswith(_PLATFORM_PREFIXES)
    ]
    out.append(("content-type", "application/json"))
    return out


def forwarded_headers(
    raw: Iterable[tuple[bytes, bytes]], credential: list[tuple[str, str]] | None
) -> list[tuple[str, str]]:
    """Every header the upstream gets: the client's (as above) with its credential, or,
    where the gateway holds the upstream's credential (auth/authenticator.py), with that."""
    headers = upstream_headers(raw)
    if credential is not None:
        headers = [item for item in headers if item[0] not in _CREDENTIAL_HEADERS] + credential
    for name, value in headers:
        if not _FIELD_VALUE.fullmatch(value):
            # The upstream client would refuse it locally: that is the client's
            # error, not an upstream one to retry and answer 502.
            raise GatewayError(400, f"The {name} header's value is not a valid HTTP field value.")
    return headers


def downstream_headers(raw: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """The upstream's headers (as httpx2 decoded them) that the client gets, as bytes."""
    pairs = [(key.lower(), value) for key, value in raw]
    dropped = _NOT_DOWNSTREAM | _connection_named(pairs)
    return [
        (key.encode("ascii"), value.encode("ascii"))
        for key, value in pairs
        if key not in dropped and _FIELD_VALUE.fullmatch(value)
    ]


def with_content_type(headers: list[tuple[str, str]], value: bytes | None) -> list[tuple[str, str]]:
    """`headers` with the client's own Content-Type (or none, as it sent none) instead of
    JSON's: for a body the gateway forwards without reading it, such as a file upload."""
    out = [(key, text) for key, text in headers if key != "content-type"]
    if value is not None:
        out.append(("content-type", _ascii(value)))
    return out
