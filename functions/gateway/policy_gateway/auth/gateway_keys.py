"""The gateway keys clients present in `gateway_key` mode: the secret's format, and the check.

Keys are kept only as SHA-256 digests, and a presented key is compared with
every valid one in constant time, so neither a key's length nor which key came
close shows in the timing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..parameters import ValueFormatError

MIN_SECRET_LENGTH = 16
"""The shortest credential the gateway treats as a secret: scrubbed from what it
relays, looked for in paths. Gateway keys must be at least this long."""


class SecretFormatError(ValueFormatError):
    """A secret's value has none of the accepted shapes. Never carries the value."""


def _digest(value: bytes) -> bytes:
    # Comparing fixed-length digests keeps a key's length out of the timing, too.
    return hashlib.sha256(value).digest()


@dataclass(frozen=True)
class GatewayKey:
    """A valid key, kept only as its digest, the name the logs show for its holder, and
    the groups its holder belongs to (which per-caller policy chains apply)."""

    digest: bytes
    name: str
    groups: tuple[str, ...] = ()


def parse_gateway_keys(text: str) -> tuple[GatewayKey, ...]:
    """The valid keys in `{"keys": [...]}`, `[...]` or `{"name": ..., "key": "..."}`.

    List entries are bare strings or `{"name": ..., "key": "...", "groups": [...]}`
    objects (`groups` optional: a list of non-empty strings). The single-object
    shape is what CloudFormation's GenerateSecretString writes
    (`SecretStringTemplate` `{"name": ...}` plus `GenerateStringKey` `key`).
    """
    try:
        value = json.loads(text)
    except ValueError:
        raise SecretFormatError("gateway keys secret is not JSON") from None
    if isinstance(value, dict):
        value = value.get("keys", [value])
    if not isinstance(value, list):
        raise SecretFormatError(_KEYS_SHAPE)
    keys: list[GatewayKey] = []
    for position, entry in enumerate(value):
        groups: tuple[str, ...] = ()
        if isinstance(entry, dict):
            key, name = entry.get("key"), entry.get("name", f"key-{position}")
            groups = _groups(entry.get("groups", []), name)
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
        keys.append(GatewayKey(_digest(key.strip().encode()), name, groups))
    if not keys:
        raise SecretFormatError("gateway keys secret holds no usable key")
    return tuple(keys)


def _groups(value: object, name: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(group, str) and group.strip() for group in value
    ):
        # The name is safe to show; the key is never part of the message.
        raise SecretFormatError(f"gateway key {name!r}: groups must be a list of non-empty strings")
    return tuple(group.strip() for group in value)


_KEYS_SHAPE = (
    'gateway keys secret must be {"keys": [...]}, a JSON list, or {"name": ..., "key": "..."};'
    ' list entries are strings or {"name": ..., "key": "...", "groups": [...]}'
)


def match_key(presented: Sequence[bytes], valid: Sequence[GatewayKey]) -> GatewayKey | None:
    """The key presented, if any.

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
