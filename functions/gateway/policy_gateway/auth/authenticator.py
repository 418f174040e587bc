"""Who may call through the gateway, and which credentials go upstream.

`passthrough`: the client's own `x-api-key` / `Authorization` goes upstream and
the upstream decides. `gateway_key`: the client presents a gateway key (as
`x-api-key` or `Authorization: Bearer`, the two ways SDKs and Claude Code send
one); it is checked against every key in a Secrets Manager secret, stripped,
and the Anthropic key from a second secret goes upstream instead, so clients
never hold it. Several keys can be valid at once, which is how keys rotate
without downtime.

Both secrets are re-read every SECRETS_TTL_SECONDS (off the event loop). When
Secrets Manager is throttled, down or stalled, the last good value keeps
serving (an outage must not fail every call; the price is that a removed key
works until Secrets Manager answers again); a gateway that never read one
refuses calls rather than guess.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol
from urllib.parse import unquote, unquote_plus

from .. import names, settings
from ..errors import GatewayError
from ..observability import metrics
from ..observability.logs import logger
from ..parameters import TTLCache, keep_last_good, read_secret
from .gateway_keys import GatewayKey, match_key, parse_gateway_keys
from .upstream_key import UpstreamKey

RawHeaders = Iterable[tuple[bytes, bytes]]

_REDACTED = b"[redacted]"


@dataclass(frozen=True)
class Credentials:
    """Who called, the credential the upstream gets, and the values never to echo back."""

    upstream_credential: list[tuple[str, str]] | None
    """None: the client's own `x-api-key` / `Authorization` go upstream. A list: they
    are replaced by these headers (none at all for an upstream that signs with IAM)."""
    secrets: tuple[bytes, ...]
    caller: str | None = None
    """Who called, never a secret: the gateway key's name (gateway_key mode) or a
    digest of the client's key (passthrough), for the logs and the fallback budget."""

    def scrub(self, body: bytes) -> bytes:
        """Blank out any credential of this call that an upstream error body repeats."""
        for secret in self.secrets:
            if secret in body:
                body = body.replace(secret, _REDACTED)
        return body

    def scrub_text(self, text: str | None) -> str | None:
        """An upstream value for a log line, with this call's credentials blanked out."""
        return None if text is None else self.scrub(text.encode()).decode("utf-8", "replace")

    def scrub_query(self, query: bytes) -> bytes:
        """Blank out every query parameter that carries a credential, in any encoding
        the upstream could decode it from (raw, %-escaped, `+` for space)."""
        if not self.secrets:
            return query
        secrets = [secret.decode("latin-1") for secret in self.secrets]

        def carries(part: bytes) -> bool:
            raw = part.decode("latin-1")
            readings = (raw, unquote(raw, "latin-1"), unquote_plus(raw, "latin-1"))
            return any(secret in reading for secret in secrets for reading in readings)

        pieces = query.split(b"&")
        for index, piece in enumerate(pieces):
            name, _, value = piece.partition(b"=")
            if carries(value) and not carries(name):
                pieces[index] = name + b"=" + _REDACTED
            elif carries(piece):
                pieces[index] = _REDACTED
        scrubbed = b"&".join(pieces)
        # A key spread over several parameters: nothing of the query goes on.
        return _REDACTED if carries(scrubbed) else scrubbed


class Authenticator(Protocol):
    async def authorize(self, raw: Sequence[tuple[bytes, bytes]]) -> Credentials: ...

    async def warm(self) -> None:
        """Read whatever `authorize` needs, so that the first call does not."""
        ...


def _presented(raw: RawHeaders) -> list[bytes]:
    """Every credential value the client sent, in either header."""
    values: list[bytes] = []
    for key, value in raw:
        name = key.lower()
        if name == b"x-api-key":
            values.append(value.strip())
        elif name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                values.append(token.strip())
    return [value for value in values if value]


def key_caller(key: bytes) -> str:
    """A client's key as its caller name: stable, short, and never the key itself.

    64 bits of SHA-256 tell callers apart without being a way back to the key.
    """
    return "key:" + hashlib.sha256(key).hexdigest()[:16]


class PassthroughAuth:
    async def authorize(self, raw: Sequence[tuple[bytes, bytes]]) -> Credentials:
        presented = _presented(raw)
        caller = key_caller(presented[0]) if presented else None
        return Credentials(None, tuple(presented), caller)

    async def warm(self) -> None:
        """Nothing to read: the client's own key goes upstream."""


def _unavailable() -> GatewayError:
    # A fresh error per refused call: one shared instance would gather every
    # raise's traceback, keeping each failed call's frames (its request body and
    # credentials) alive for as long as the outage lasts.
    return GatewayError(
        500, "The gateway cannot read its credentials right now; try again shortly.", "api_error"
    )


class GatewayKeyAuth:
    def __init__(
        self,
        keys_secret: str,
        upstream_key: UpstreamKey | None,
        ttl: float,
        reader: Callable[[str], str] = read_secret,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`upstream_key` None: the upstream takes no API key (Bedrock signs with IAM)."""
        self._keys: TTLCache[tuple[GatewayKey, ...] | None] = TTLCache(
            lambda: parse_gateway_keys(reader(keys_secret)),
            ttl,
            partial(keep_last_good, keys_secret),
            clock,
        )
        self._upstream_key = upstream_key

    async def warm(self) -> None:
        """Both secrets, read together: a failure is handled as on a call (never raised)."""
        if self._upstream_key is None:
            await self._keys.get()
        else:
            await asyncio.gather(self._keys.get(), self._upstream_key.get())

    async def authorize(self, raw: Sequence[tuple[bytes, bytes]]) -> Credentials:
        valid = await self._keys.get()
        if valid is None:
            raise _unavailable()
        presented = _presented(raw)
        caller = match_key(presented, valid)
        if caller is None:
            metrics.count(names.METRIC_AUTH_FAILURES)
            logger.warning("gateway key rejected", extra={"presented": len(presented)})
            raise GatewayError(
                401,
                "Invalid or missing gateway key: send it as x-api-key or Authorization: Bearer.",
                "authentication_error",
            )
        if self._upstream_key is None:
            return Credentials([], tuple(presented), caller)
        api_key = await self._upstream_key.get()
        if api_key is None:
            raise _unavailable()
        return Credentials([("x-api-key", api_key)], (*presented, api_key.encode()), caller)


def authenticator(config: settings.Settings, key: UpstreamKey | None) -> Authenticator:
    if config.auth_mode == settings.AUTH_GATEWAY_KEY:
        return GatewayKeyAuth(
            config.gateway_keys_secret, key, config.secrets_ttl, clock=config.clock
        )
    return PassthroughAuth()
