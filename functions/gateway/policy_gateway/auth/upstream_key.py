"""The gateway's own Anthropic API key: its secret's format, and one cached reader of it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial

from .. import settings
from ..aws_reads import read_secret
from ..parameters import TTLCache, keep_last_good


def parse_api_key(text: str) -> str:
    """The key from a plain string or `{"api_key": "..."}`; ValueError otherwise."""
    key: object = text.strip()
    if text.lstrip().startswith("{"):
        try:
            key = json.loads(text).get("api_key")
        except (ValueError, AttributeError):
            key = None
    if not isinstance(key, str) or not key.strip() or not key.strip().isascii():
        raise ValueError('an API key secret must be a string or {"api_key": "..."}')
    return key.strip()


class UpstreamKey:
    """The gateway's own Anthropic API key, from its secret, TTL-cached.

    One reader for everyone who needs it: the gateway_key auth sends it
    upstream, and a policy that calls Anthropic itself (tool_call_judge) gets
    it through its PolicyContext, so both see a rotation at the same moment and
    a stalled Secrets Manager holds neither for longer than parameters.py allows.
    """

    def __init__(
        self,
        secret: str,
        ttl: float,
        reader: Callable[[str], str] = read_secret,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache: TTLCache[str | None] = TTLCache(
            lambda: parse_api_key(reader(secret)), ttl, partial(keep_last_good, secret), clock
        )

    async def get(self) -> str | None:
        """The key, or None while its secret has never been read."""
        return await self._cache.get()


def upstream_key(config: settings.Settings) -> UpstreamKey | None:
    """The gateway's Anthropic key, where it has one: never with Bedrock, which signs with IAM.

    Read only when first asked for: in passthrough mode only a policy that
    calls Anthropic itself asks.
    """
    if config.bedrock:
        return None
    return UpstreamKey(config.upstream_api_key_secret, config.secrets_ttl, clock=config.clock)
