"""What differs between upstream APIs, behind one interface: the request, its signature,
the answers, the errors and the stream framing.

The Anthropic API is the identity (this module); Amazon Bedrock is bedrock.py,
imported only when configured. A provider turns the gateway's request into the
upstream's and the upstream's answers back into the Messages API's, so the
endpoint, the policies and the fallback see one API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx2

from .. import settings
from ..headers import downstream_headers


@dataclass(frozen=True)
class Outbound:
    """One request as the upstream takes it."""

    url: str
    body: bytes
    headers: list[tuple[str, str]]


class Provider(Protocol):
    """What differs between upstream APIs; retries, timeouts, spans and metrics do not."""

    request_id_header: str
    """The response header carrying the upstream's id for the request."""

    def outbound(
        self, path: str, body: bytes, headers: Sequence[tuple[str, str]], *, stream: bool
    ) -> Outbound:
        """The upstream request for a gateway call (raises GatewayError if it has none)."""
        ...

    async def sign(self, request: httpx2.Request) -> None:
        """Authenticate one attempt (each retry is signed afresh)."""
        ...

    def status_error(self, status: int, headers: httpx2.Headers, body: bytes) -> tuple[int, bytes]:
        """The Messages API status and error body for an upstream error."""
        ...

    def answer(self, path: str, body: bytes) -> bytes:
        """The Messages API body for a successful non-streaming answer."""
        ...

    def events(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The stream as Messages API SSE bytes."""
        ...

    def downstream(self, headers: httpx2.Headers) -> list[tuple[bytes, bytes]]:
        """The response headers the client gets."""
        ...


class AnthropicProvider:
    """The Messages API itself: everything passes through as it is."""

    request_id_header = "request-id"

    def __init__(self, base_url: str) -> None:
        if httpx2.URL(base_url).scheme not in ("http", "https"):
            # Fail the start, not every call: a base URL without a scheme is a
            # configuration error the readiness check should surface.
            raise ValueError(f"{settings.ENV_UPSTREAM_BASE_URL} must be an http(s) URL")
        self._base_url = base_url.rstrip("/")

    def outbound(
        self, path: str, body: bytes, headers: Sequence[tuple[str, str]], *, stream: bool
    ) -> Outbound:
        return Outbound(self._base_url + path, body, list(headers))

    async def sign(self, request: httpx2.Request) -> None:
        pass

    def status_error(self, status: int, headers: httpx2.Headers, body: bytes) -> tuple[int, bytes]:
        return status, body

    def answer(self, path: str, body: bytes) -> bytes:
        return body

    def events(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        return chunks

    def downstream(self, headers: httpx2.Headers) -> list[tuple[bytes, bytes]]:
        return downstream_headers(headers.multi_items())


def provider_for(config: settings.Settings) -> Provider:
    if config.bedrock:
        # Imported only here: it brings botocore, which the Anthropic path never needs.
        from .bedrock.provider import BedrockProvider

        return BedrockProvider(config)
    return AnthropicProvider(config.upstream_base_url)
