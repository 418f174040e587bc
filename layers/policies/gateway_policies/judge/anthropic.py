"""The Anthropic provider: the judge's request to the Messages API, over httpx2.

httpx2 is what the gateway relays with and what the `anthropic` SDK is built
on; the SDK itself costs about a second to import, so it stays out. The key is
the `api_key_env` variable's, else the gateway's own Anthropic key (read
through the gateway's cached secret reader, so a rotation reaches the judge
when it reaches the gateway); the base is `base_url`, else the gateway's
UPSTREAM_BASE_URL (so in a local run the simulator answers), else the API's.
No retries: the judge's timeout is short and `on_error` decides what a failure
means.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import httpx2

from .errors import STATUS, TIMEOUT, TRANSPORT, JudgeError
from .provider import JudgeProvider

if TYPE_CHECKING:
    from ..base import PolicyContext
    from .prompt import JudgeRequest

API_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


@cache
def _tls() -> ssl.SSLContext:
    return httpx2.create_ssl_context()


class AnthropicProvider(JudgeProvider):
    name = "anthropic"

    _client: httpx2.AsyncClient | None = None
    _client_loop: asyncio.AbstractEventLoop | None = None

    async def _http(self) -> httpx2.AsyncClient:
        # A client's connection pool belongs to the event loop it first ran on; one
        # gateway process has one loop, but a test harness may have several.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # Loading the trust store takes tens to hundreds of milliseconds: off the
            # loop, once per process, so the first judge call stalls no other call.
            tls = await asyncio.to_thread(_tls)
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

    async def _key(self, ctx: PolicyContext) -> str | None:
        key = os.environ.get(self.options.api_key_env)
        if key or ctx.upstream_api_key is None:
            return key
        return await ctx.upstream_api_key()

    def _url(self, ctx: PolicyContext) -> str:
        base = self.options.base_url or ctx.upstream_base_url or API_BASE_URL
        return base.rstrip("/") + "/v1/messages"

    async def send(
        self, request: JudgeRequest, ctx: PolicyContext, seconds: float
    ) -> Mapping[str, Any]:
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        key = await self._key(ctx)
        if key:
            headers["x-api-key"] = key
        try:
            response = await (await self._http()).post(
                self._url(ctx),
                json=request.messages_body(),
                headers=headers,
                timeout=httpx2.Timeout(seconds),
            )
        except httpx2.TimeoutException:
            raise JudgeError(TIMEOUT, "the judge did not answer in time") from None
        except httpx2.HTTPError as exc:
            raise JudgeError(TRANSPORT, type(exc).__name__) from None
        if response.status_code >= 400:
            raise JudgeError(
                STATUS, f"the judge answered {response.status_code}", status=response.status_code
            )
        try:
            answer = response.json()
        except ValueError:
            raise JudgeError(TRANSPORT, "the judge's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise JudgeError(TRANSPORT, "the judge's answer is not a JSON object")
        return answer
