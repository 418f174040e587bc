"""What an upstream attempt can end in besides an answer, and httpx2's errors translated.

The one place a transport error becomes the gateway's own: the endpoint, the
fallback and the relays see only these two exceptions.
"""

from __future__ import annotations

import json

import httpx2

from ..errors import error_bytes
from ..observability import spans


class UpstreamStatusError(Exception):
    """The upstream answered with an error status. Its body and headers reach the client as-is.

    `span` is the failed attempt's span, still open so the fallback can
    annotate it; whoever handles the error ends it.
    """

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        span: spans.Span,
        request_id: str | None,
        *,
        final: bool = False,
    ) -> None:
        super().__init__(f"upstream status {status}")
        self.final = final
        """The upstream's status is one the gateway never relays (a 3xx, a 999): the
        502 stands for it, and asking again would only repeat it."""
        self.status = status
        self.body = body
        self.headers = headers
        self.span = span
        self.request_id = request_id
        """The upstream's id for the request: what support asks for (Anthropic's
        `request-id`, Bedrock's `x-amzn-requestid`)."""

    def tell_client_not_to_retry(self) -> None:
        """The gateway already retried: an SDK retrying too would multiply the load
        (up to nine upstream calls for one throttled request)."""
        self.headers = [(k, v) for k, v in self.headers if k != b"x-should-retry"]
        self.headers.append((b"x-should-retry", b"false"))

    def _payload(self) -> object:
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None

    @property
    def client_body(self) -> bytes:
        """The body for the client: the upstream's own when it is Anthropic-shaped.

        A load balancer's HTML page or a proxy's odd JSON becomes an
        Anthropic-shaped error with the same status, so SDKs parse it.
        """
        payload = self._payload()
        if (
            isinstance(payload, dict)
            and payload.get("type") == "error"
            and isinstance(payload.get("error"), dict)
        ):
            return self.body
        return error_bytes(
            self.status, f"The upstream API answered HTTP {self.status} without an API error body."
        )

    @property
    def error_type(self) -> str:
        """The upstream's `error.type`, for the fallback's log line (never its message)."""
        payload = self._payload()
        error = payload.get("error") if isinstance(payload, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        return kind[:100] if isinstance(kind, str) else "<not an API error body>"

    @property
    def error_message(self) -> str:
        """The upstream's `error.message`, for a policy's repair hook only: never logged,
        since it can repeat the client's text."""
        payload = self._payload()
        error = payload.get("error") if isinstance(payload, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return message if isinstance(message, str) else ""


def unrelayable_status(status: int) -> tuple[int, bytes] | None:
    """What the client gets for an upstream status the gateway never relays, else None.

    A 3xx: relayed, an SDK (which follows redirects) would re-send the request,
    unredacted, to whatever host the upstream named, and hand its answer to
    the agent unjudged. A status outside RFC 9110's final range (e.g. 999):
    an ASGI server drops the connection rather than send it.
    """
    if 300 <= status <= 399:
        return 502, error_bytes(
            502,
            f"The upstream API answered with a redirect (HTTP {status}); "
            "the gateway neither follows nor relays redirects.",
        )
    if not 200 <= status <= 599:
        return 502, error_bytes(502, f"The upstream API answered with HTTP status {status}.")
    return None


class UpstreamUnavailable(Exception):
    """No usable answer from the upstream after every retry: refused, reset, timed out,
    undecodable or too large."""

    def __init__(self, message: str, *, timeout: bool) -> None:
        super().__init__(message)
        self.timeout = timeout


UNREADABLE_ERRORS = (httpx2.TransportError, httpx2.DecodingError)
"""What reading an upstream body can raise: a reset or stall, or a body its
`content-encoding` does not describe (a `gzip` body that is not gzip)."""


def unavailable(exc: httpx2.TransportError | httpx2.DecodingError) -> UpstreamUnavailable:
    return UpstreamUnavailable(_describe(exc), timeout=isinstance(exc, httpx2.TimeoutException))


def _describe(exc: httpx2.TransportError | httpx2.DecodingError) -> str:
    if isinstance(exc, httpx2.DecodingError):
        return "the upstream API's answer could not be decoded as its content-encoding says"
    if isinstance(exc, httpx2.ConnectTimeout):
        return "timed out connecting to the upstream API"
    if isinstance(exc, httpx2.TimeoutException):
        return "timed out waiting for the upstream API"
    if isinstance(exc, httpx2.ConnectError):
        return "could not connect to the upstream API"
    return "the connection to the upstream API failed"
