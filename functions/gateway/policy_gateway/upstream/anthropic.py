"""The Anthropic API as a provider: the identity, everything passes through as it is."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import httpx2

from .. import settings
from ..headers import downstream_headers
from .provider import Outbound


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
