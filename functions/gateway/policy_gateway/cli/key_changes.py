"""What `policy-gateway keys` does to the gateway keys: pure changes to the list of keys.

Each change takes the keys as the secret holds them now and returns the keys
to write, so it can be applied again to a newer version when another operator
wrote in between (secret_versions.py). Times are wall-clock seconds.

A rotation keeps the old key valid for a grace period (DEFAULT_GRACE, or
`--grace`), long enough to move every client to the new key; a revocation
removes every key of the name at once. An ended key stays in the secret,
with its `expires`, for EXPIRED_KEPT_SECONDS: every gateway that reads it
refuses the key from that moment on by its own clock, naming it (`reason:
expired`, `key_name`), and a later write cannot turn that into a refusal of
an unknown key. Writes drop keys ended longer ago, so rotations do not pile
up in the secret.

What no entry can do is reach a gateway that read the keys before the
rotation was written: it holds a copy in which the old key never ends, until
it re-reads the secret, within SECRETS_TTL_SECONDS of the write. So the old
key is refused everywhere from the later of its end and that re-read
(`refused_everywhere`); a grace of at least the TTL makes it its end exactly.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import replace
from datetime import UTC, datetime

from ..auth.gateway_keys import GatewayKey, key_digest
from .operator_errors import OperatorError

GATEWAY_KEY_PREFIX = "gk-"
DEFAULT_GRACE = "24h"
# Names and groups end up in log lines, metric-free chain documents and the
# `callers` keys of a chain, where `key:` and `group:` mean something else.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def new_key() -> str:
    """A fresh gateway key: 256 random bits, recognisable by its prefix."""
    return GATEWAY_KEY_PREFIX + secrets.token_urlsafe(32)


def checked_name(name: str, what: str = "key name") -> str:
    if not _NAME.fullmatch(name):
        raise OperatorError(
            f"{what} {name!r} is not allowed",
            "use letters, digits and . _ @ - (at most 64, starting with a letter or digit)",
            exit_code=2,
        )
    return name


def duration(text: str) -> float:
    """Seconds in `30s`, `15m`, `24h`, `7d` or a bare number of seconds."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise OperatorError(
            f"{text!r} is not a duration", "write it as 30s, 15m, 24h or 7d", exit_code=2
        )
    return float(found.group(1)) * _UNIT_SECONDS[found.group(2)]


def expiry(text: str, now: float) -> float:
    """When `--expires` ends a key: a duration from now, or an ISO 8601 date or time (UTC
    unless it names a zone); never in the past."""
    if _DURATION.fullmatch(text.strip()):
        moment = now + duration(text)
    else:
        try:
            parsed = datetime.fromisoformat(text.strip())
        except ValueError:
            raise OperatorError(
                f"--expires {text!r} is neither a duration nor an ISO 8601 time",
                "write e.g. 90d, 2030-01-31 or 2030-01-31T12:00:00Z",
                exit_code=2,
            ) from None
        moment = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    if moment <= now:
        raise OperatorError(f"--expires {text!r} is not in the future", "pick a later time", 2)
    return moment


EXPIRED_KEPT_SECONDS = 7 * 86400.0


def _kept(keys: tuple[GatewayKey, ...], now: float) -> tuple[GatewayKey, ...]:
    """The keys a write keeps: all but those that ended more than EXPIRED_KEPT_SECONDS ago."""
    return tuple(
        key for key in keys if key.expires is None or now < key.expires + EXPIRED_KEPT_SECONDS
    )


def refused_everywhere(ends: float, written: float, ttl: float) -> float:
    """When every running gateway refuses a key a write at `written` made end at `ends`: at
    its end, once each has re-read the keys (within `ttl` of the write); else at that re-read."""
    return max(ends, written + ttl)


def _named(keys: tuple[GatewayKey, ...], name: str, now: float) -> list[GatewayKey]:
    return [key for key in keys if key.name == name and not key.expired(now)]


def add(
    keys: tuple[GatewayKey, ...],
    name: str,
    key: str,
    groups: tuple[str, ...],
    now: float,
    expires: float | None,
) -> tuple[GatewayKey, ...]:
    if _named(keys, name, now):
        raise OperatorError(
            f"a valid key named {name!r} exists",
            f"pick another name, or `policy-gateway keys rotate {name}` to replace its key",
            exit_code=2,
        )
    return (*_kept(keys, now), GatewayKey(key_digest(key), name, groups, now, expires))


def rotate(
    keys: tuple[GatewayKey, ...],
    name: str,
    key: str,
    now: float,
    grace: float,
    expires: float | None,
) -> tuple[GatewayKey, ...]:
    """A new key for `name`, with the groups of its newest; the old ones end `grace` from now
    (or earlier, if they were to end earlier)."""
    current = _named(keys, name, now)
    if not current:
        raise _unknown(name)
    ending = now + grace
    kept = tuple(
        replace(old, expires=min(old.expires or ending, ending)) if old in current else old
        for old in keys
    )
    newest = max(current, key=lambda old: old.created or 0.0)
    return (*_kept(kept, now), GatewayKey(key_digest(key), name, newest.groups, now, expires))


def revoke(keys: tuple[GatewayKey, ...], name: str, now: float) -> tuple[GatewayKey, ...]:
    """Every key of `name` removed, those still in a rotation's grace period too."""
    if not _named(keys, name, now):
        raise _unknown(name)
    return tuple(key for key in _kept(keys, now) if key.name != name)


def _unknown(name: str) -> OperatorError:
    return OperatorError(
        f"no valid key named {name!r}", "`policy-gateway keys list` shows the names", exit_code=2
    )


def listing(keys: tuple[GatewayKey, ...], now: float) -> list[dict[str, object]]:
    """What `keys list` prints of each key: never the key, never its digest."""
    shown: list[dict[str, object]] = []
    for key in keys:
        entry = key.entry()
        del entry["sha256"]
        entry["state"] = "expired" if key.expired(now) else "valid"
        shown.append(entry)
    return shown
