"""The gateway keys clients present in `gateway_key` mode: the secret's format, and the check.

Keys are kept only as SHA-256 digests, and a presented key is compared with
every valid one in constant time, so neither a key's length nor which key came
close shows in the timing.

The secret holds keys two ways. What `policy-gateway keys` writes holds no key,
only its digest, when it was made and until when it is valid:
`{"name": ..., "sha256": "<64 hex>", "groups": [...], "created": "<ISO 8601>",
"expires": "<ISO 8601>" | null}`. What operators wrote by hand before, and what
the template generates, holds the key itself (`"key": "..."`, or a bare string);
it still works, and the first `keys` command rewrites it as digests.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..parameters import ValueFormatError

MIN_SECRET_LENGTH = 16
"""The shortest credential the gateway treats as a secret: scrubbed from what it
relays, looked for in paths. Gateway keys must be at least this long."""


class SecretFormatError(ValueFormatError):
    """A secret's value has none of the accepted shapes. Never carries the value."""


def _digest(value: bytes) -> bytes:
    # Comparing fixed-length digests keeps a key's length out of the timing, too.
    return hashlib.sha256(value).digest()


def key_digest(key: str) -> bytes:
    """The digest the secret keeps of `key`, as the check computes it from a presented one."""
    return _digest(key.strip().encode())


@dataclass(frozen=True)
class GatewayKey:
    """A valid key, kept only as its digest, the name the logs show for its holder, and
    the groups its holder belongs to (which per-caller policy chains apply).

    `created` and `expires` are wall-clock seconds (None: not recorded, never).
    """

    digest: bytes
    name: str
    groups: tuple[str, ...] = ()
    created: float | None = None
    expires: float | None = None
    plain: bool = field(default=False, compare=False)
    """Whether the secret holds the key itself rather than its digest (the old shapes)."""

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires

    def entry(self) -> dict[str, object]:
        """The key as the secret keeps it: its digest, never the key."""
        return {
            "name": self.name,
            "sha256": self.digest.hex(),
            "groups": list(self.groups),
            "created": iso_time(self.created),
            "expires": iso_time(self.expires),
        }


def keys_document(keys: Sequence[GatewayKey]) -> str:
    """The secret's value holding `keys` as digests (what `parse_gateway_keys` reads back)."""
    return json.dumps({"keys": [key.entry() for key in keys]}, indent=1)


def iso_time(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _moment(value: object, name: str, field: str) -> float | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    # A time without a zone would be read in the zone of whichever machine reads it.
    if parsed is None or parsed.tzinfo is None:
        raise SecretFormatError(
            f"gateway key {name!r}: {field} must be an ISO 8601 time with a zone, or null"
        )
    return parsed.timestamp()


def parse_gateway_keys(text: str) -> tuple[GatewayKey, ...]:
    """The keys in `{"keys": [...]}`, `[...]` or `{"name": ..., "key": "..."}`, expired or not.

    List entries are bare strings, `{"name": ..., "key": "...", "groups": [...]}`
    objects (`groups` optional: a list of non-empty strings), or the same with
    `"sha256"` (the key's digest, in hex) instead of `"key"`; either object may
    carry `created` and `expires`. The single-object shape is what
    CloudFormation's GenerateSecretString writes (`SecretStringTemplate`
    `{"name": ...}` plus `GenerateStringKey` `key`). An empty list is no key at
    all (every call is refused: the last key was revoked); entries none of
    which is usable are a mistake, and refused.
    """
    try:
        value = json.loads(text)
    except ValueError:
        raise SecretFormatError("gateway keys secret is not JSON") from None
    if isinstance(value, dict):
        value = value.get("keys", [value])
    if not isinstance(value, list):
        raise SecretFormatError(_KEYS_SHAPE)
    if not value:
        return ()
    keys: list[GatewayKey] = []
    for position, entry in enumerate(value):
        if isinstance(entry, dict) and "sha256" in entry:
            keys.append(_hashed(entry, position))
            continue
        groups: tuple[str, ...] = ()
        created = expires = None
        if isinstance(entry, dict):
            key, name = entry.get("key"), entry.get("name", f"key-{position}")
            groups = _groups(entry.get("groups", []), name)
            created = _moment(entry.get("created"), str(name), "created")
            expires = _moment(entry.get("expires"), str(name), "expires")
        else:
            key, name = entry, f"key-{position}"
        if not isinstance(key, str) or not isinstance(name, str):
            raise SecretFormatError(_KEYS_SHAPE)
        # An empty key would let a request with no key at all through.
        if not key.strip():
            continue
        if len(key.strip()) < MIN_SECRET_LENGTH:
            # A short key is guessable, and too short to scrub from what the
            # gateway relays without mangling text: the whole secret is refused.
            raise SecretFormatError(
                f"gateway key {name!r} is shorter than {MIN_SECRET_LENGTH} characters;"
                " use a longer, random key"
            )
        keys.append(GatewayKey(key_digest(key), name, groups, created, expires, plain=True))
    if not keys:
        raise SecretFormatError("gateway keys secret holds no usable key")
    return tuple(keys)


def _hashed(entry: dict[str, object], position: int) -> GatewayKey:
    name, digest = entry.get("name", f"key-{position}"), entry["sha256"]
    if "key" in entry or not isinstance(name, str) or not isinstance(digest, str):
        raise SecretFormatError(_KEYS_SHAPE)
    try:
        raw = bytes.fromhex(digest)
    except ValueError:
        raw = b""
    if len(raw) != hashlib.sha256().digest_size:
        raise SecretFormatError(f"gateway key {name!r}: sha256 must be 64 hex digits")
    return GatewayKey(
        raw,
        name,
        _groups(entry.get("groups", []), name),
        _moment(entry.get("created"), name, "created"),
        _moment(entry.get("expires"), name, "expires"),
    )


def _groups(value: object, name: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(group, str) and group.strip() for group in value
    ):
        # The name is safe to show; the key is never part of the message.
        raise SecretFormatError(f"gateway key {name!r}: groups must be a list of non-empty strings")
    return tuple(group.strip() for group in value)


_KEYS_SHAPE = (
    'gateway keys secret must be {"keys": [...]}, a JSON list, or {"name": ..., "key": "..."};'
    ' list entries are strings or {"name": ..., "key": "..." or "sha256": "<hex>",'
    ' "groups": [...], "created": ..., "expires": ...}'
)


def match_key(presented: Sequence[bytes], valid: Sequence[GatewayKey]) -> GatewayKey | None:
    """The key presented, if any, expired or not (the caller decides).

    Every presented value is compared with every key, with no early exit,
    so the time taken says nothing about which key (if any) came close.
    """
    found: GatewayKey | None = None
    for value in presented:
        digest = _digest(value)
        for key in valid:
            if hmac.compare_digest(digest, key.digest):
                found = key
    return found
