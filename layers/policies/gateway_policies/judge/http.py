"""What the providers that speak HTTP share: a client per event loop, one POST, one reading.

A client's connection pool belongs to the event loop it first ran on; one
gateway process has one loop, but a harness (`judge eval`, tests) may run
several, and closes each provider's connections before its loop ends
(`aclose`). Transport failures, error statuses and answers that are not a
JSON object become `JudgeError` here, in one place, never carrying the
answer's text (it can repeat the judged block).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Mapping
from functools import cache
from typing import Any

import httpx2

from .errors import STATUS, TIMEOUT, TRANSPORT, JudgeError
from .provider import JudgeProvider


def json_body(payload: Any) -> bytes:
    """`payload` as the request body, encoded as httpx2 encodes `json=` (compact, UTF-8)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@cache
def _tls() -> ssl.SSLContext:
    return httpx2.create_ssl_context()


class HttpProvider(JudgeProvider):
    """A provider that POSTs the judge request as JSON and reads a Messages API answer."""

    _client: httpx2.AsyncClient | None = None
    _client_loop: asyncio.AbstractEventLoop | None = None

    async def _http(self) -> httpx2.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # Loading the trust store takes tens to hundreds of milliseconds: off the
            # loop, once per process, so the first judge call stalls no other call.
            tls = await asyncio.to_thread(_tls)
            # Checked again after the await: the answer's other first calls may have built
            # one meanwhile, and a second client would leak its connections.
            if self._client is None or self._client_loop is not loop:
                self._client = httpx2.AsyncClient(
                    limits=httpx2.Limits(max_connections=64, max_keepalive_connections=16),
                    verify=tls,
                )
                self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = None

    def status_error(self, response: httpx2.Response) -> JudgeError:
        """The judge error for an error status (a provider may name more than the status)."""
        status = response.status_code
        return JudgeError(STATUS, f"the judge answered {status}", status=status)

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], seconds: float
    ) -> Mapping[str, Any]:
        """POST `body` (JSON) and return the answer's JSON object, within `seconds`."""
        try:
            response = await (await self._http()).post(
                url, content=body, headers=headers, timeout=httpx2.Timeout(seconds)
            )
        except httpx2.TimeoutException:
            raise JudgeError(TIMEOUT, "the judge did not answer in time") from None
        except httpx2.HTTPError as exc:
            raise JudgeError(TRANSPORT, type(exc).__name__) from None
        if response.status_code >= 400:
            raise self.status_error(response)
        try:
            answer = response.json()
        except ValueError:
            raise JudgeError(TRANSPORT, "the judge's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise JudgeError(TRANSPORT, "the judge's answer is not a JSON object")
        return answer
