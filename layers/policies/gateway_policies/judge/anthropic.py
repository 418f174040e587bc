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

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .http import HttpProvider, json_body

if TYPE_CHECKING:
    from ..base import PolicyContext
    from .prompt import JudgeRequest

API_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


class AnthropicProvider(HttpProvider):
    name = "anthropic"

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
        return await self.post(self._url(ctx), json_body(request.messages_body()), headers, seconds)
