"""Who may call through the gateway, and which credentials go upstream.

`passthrough`: the client's own `x-api-key` / `Authorization` goes upstream and
the upstream decides. `gateway_key`: the client presents a gateway key (as
`x-api-key` or `Authorization: Bearer`, the two ways SDKs and Claude Code send
one); it is checked against every key in a Secrets Manager secret, stripped,
and the Anthropic key from a second secret goes upstream instead, so clients
never hold it. Several keys can be valid at once, which is how keys rotate
without downtime: a rotated key carries an `expires` time, and an expired key
is refused like a wrong one (`policy-gateway keys rotate`).

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

from .. import names, settings
from ..aws_reads import read_secret
from ..errors import GatewayError
from ..observability import metrics
from ..observability.logs import logger
from ..parameters import TTLCache, keep_last_good
from .gateway_keys import MIN_SECRET_LENGTH, GatewayKey, match_key, parse_gateway_keys
from .path_secrets import carries_secret, redact_path
from .upstream_key import UpstreamKey

RawHeaders = Iterable[tuple[bytes, bytes]]

_REDACTED = b"[redacted]"

_API_KEY = b"x-api-key"
_AUTHORIZATION = b"authorization"


@dataclass(frozen=True)
class Credentials:
    """Who called, the credential the upstream gets, and the values never to echo back."""

    upstream_credential: list[tuple[str, str]] | None
    """None: the client's own `x-api-key` / `Authorization` go upstream. A list: they
    are replaced by these headers (none at all for an upstream that signs with IAM)."""
    secrets: tuple[bytes, ...]
    """This call's credentials long enough to be secrets (MIN_SECRET_LENGTH): shorter
    values are never scrubbed, since blanking a one-letter key out of an upstream
    message would mangle its words ("Bedroc[redacted]") and hide nothing."""
    caller: str | None = None
    """Who called, never a secret: the gateway key's name (gateway_key mode) or a
    digest of the client's key (passthrough), for the logs and the fallback budget."""
    caller_groups: tuple[str, ...] = ()
    """The groups of the gateway key presented (its `"groups"` in the keys secret)."""
    gateway_key: bool = False
    """Whether `caller` names a gateway key: it then outranks a signed IAM principal
    (`caller.identify`)."""

    def scrub(self, body: bytes) -> bytes:
        """Blank out any credential of this call that an upstream error body repeats."""
        for secret in self.secrets:
            if secret in body:
                body = body.replace(secret, _REDACTED)
        return body

    def scrub_text(self, text: str | None) -> str | None:
        """An upstream value for a log line, with this call's credentials blanked out."""
        return None if text is None else self.scrub(text.encode()).decode("utf-8", "replace")

    @property
    def secret_texts(self) -> list[str]:
        return [secret.decode("latin-1") for secret in self.secrets]

    def scrub_query(self, query: bytes) -> bytes:
        """Blank out every query parameter that carries a credential, in any encoding
        the upstream could decode it from (raw, %-escaped, `+` for space)."""
        if not self.secrets:
            return query
        secrets = self.secret_texts

        def carries(part: bytes) -> bool:
            return carries_secret(part.decode("latin-1"), secrets)

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

    def refuse_path(self, path: str) -> None:
        """Refuse a path that carries this call's credential: the upstream would get it
        in its request line."""
        if carries_secret(path, self.secret_texts):
            raise GatewayError(
                400,
                "A credential must not appear in the URL path:"
                " send it only as x-api-key or Authorization: Bearer.",
            )


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


def _secrets(values: Iterable[bytes]) -> tuple[bytes, ...]:
    return tuple(value for value in values if len(value) >= MIN_SECRET_LENGTH)


def _refused(message: str) -> GatewayError:
    return GatewayError(401, message, "authentication_error")


def _forwarded_credential(raw: Sequence[tuple[bytes, bytes]]) -> bytes | None:
    """The one credential a passthrough request hands the upstream, or None for none.

    The caller is named, and budgeted, after this value, so the request must
    leave no doubt which credential the upstream authenticates: a repeated
    credential header or two different credentials are refused. An
    `Authorization` value without the Bearer scheme counts whole, since the
    upstream gets it too.
    """
    values: list[bytes] = []
    for name in (_API_KEY, _AUTHORIZATION):
        found = [value.strip() for key, value in raw if key.lower() == name]
        if len(found) > 1:
            raise _refused(f"Send one {name.decode()} header, not {len(found)}.")
        if found and name == _AUTHORIZATION:
            scheme, _, token = found[0].partition(b" ")
            found = [token.strip() if scheme.lower() == b"bearer" else found[0]]
        values.extend(value for value in found if value)
    if len(set(values)) > 1:
        raise _refused("Send one credential: x-api-key and Authorization carry different values.")
    return values[0] if values else None


def path_for_spans(raw: RawHeaders, path: str) -> str:
    """`path` without the credentials the client presented, for the call's span,
    which opens before the call is authorized."""
    return redact_path(path, [secret.decode("latin-1") for secret in _secrets(_presented(raw))])


def key_caller(key: bytes) -> str:
    """A client's key as its caller name: stable, short, and never the key itself.

    64 bits of SHA-256 tell callers apart without being a way back to the key.
    """
    return "key:" + hashlib.sha256(key).hexdigest()[:16]


def passthrough_caller(key: bytes) -> str | None:
    """The caller a passthrough call sending `key` as its `x-api-key` is named after
    (`policy-gateway callers id`), read exactly as a call's header is; None for no key."""
    credential = _forwarded_credential([(_API_KEY, key)])
    return None if credential is None else key_caller(credential)


class PassthroughAuth:
    async def authorize(self, raw: Sequence[tuple[bytes, bytes]]) -> Credentials:
        credential = _forwarded_credential(raw)
        if credential is None:
            return Credentials(None, ())
        return Credentials(None, _secrets([credential]), key_caller(credential))

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
        now: Callable[[], float] = time.time,
    ) -> None:
        """`upstream_key` None: the upstream takes no API key (Bedrock signs with IAM).

        `clock` times the secret's TTL; `now` (wall-clock seconds) decides which keys expired.
        """
        self._keys: TTLCache[tuple[GatewayKey, ...] | None] = TTLCache(
            lambda: parse_gateway_keys(reader(keys_secret)),
            ttl,
            partial(keep_last_good, keys_secret),
            clock,
        )
        self._upstream_key = upstream_key
        self._now = now

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
        key = match_key(presented, valid)
        if key is None or key.expired(self._now()):
            metrics.count(names.METRIC_AUTH_FAILURES)
            # An expired key's name tells the operator whose client still holds it.
            expired = {} if key is None else {"reason": "expired", "key_name": key.name}
            logger.warning("gateway key rejected", extra={"presented": len(presented), **expired})
            raise GatewayError(
                401,
                "Invalid or missing gateway key: send it as x-api-key or Authorization: Bearer.",
                "authentication_error",
            )
        if self._upstream_key is None:
            return Credentials([], _secrets(presented), key.name, key.groups, gateway_key=True)
        api_key = await self._upstream_key.get()
        if api_key is None:
            raise _unavailable()
        secrets = _secrets([*presented, api_key.encode()])
        return Credentials(
            [("x-api-key", api_key)], secrets, key.name, key.groups, gateway_key=True
        )


def authenticator(
    config: settings.Settings, key: UpstreamKey | None, now: Callable[[], float] = time.time
) -> Authenticator:
    """`now`: wall-clock seconds, for the keys' expiry."""
    if config.auth_mode == settings.AUTH_GATEWAY_KEY:
        return GatewayKeyAuth(
            config.gateway_keys_secret, key, config.secrets_ttl, clock=config.clock, now=now
        )
    return PassthroughAuth()
