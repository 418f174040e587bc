"""What differs between upstream APIs, behind one interface: the request, its signature,
the answers, the errors and the stream framing.

The interface only: it imports no implementation. The Anthropic API is the
identity (anthropic.py); Amazon Bedrock is bedrock/, imported only when
configured; client.py picks one. A provider turns the gateway's request into the
upstream's and the upstream's answers back into the Messages API's, so the
endpoint, the policies and the fallback see one API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx2


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
