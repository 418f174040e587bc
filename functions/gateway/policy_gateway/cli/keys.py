"""`policy-gateway keys add|list|rotate|revoke` and `policy-gateway callers id`.

The keys live in the secret GATEWAY_KEYS_SECRET names (with `--stack`, the
stack's function's; else this shell's, or the default), as digests with
`created` and `expires` (auth/gateway_keys.py); a new key is printed once, on
standard output, and kept nowhere. Each write reads the secret, changes it and
swaps it in only if no one wrote in between (secret_versions.py). Running
gateways see a change within SECRETS_TTL_SECONDS: a new key works, a revoked
key is refused from then on. A rotated key's end is data in the secret, so a
gateway that has read the rotation refuses it at that time exactly, by its own
clock; one that read the keys before the rotation was written accepts it until
its re-read, so `rotate` states the later of the two (key_changes.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .commands import say

if TYPE_CHECKING:
    from ..auth.gateway_keys import GatewayKey
    from .operator_targets import Targets

Keys = tuple["GatewayKey", ...]


class _Change:
    """One command's change to the keys, applied to whichever version of the secret is current
    (more than once when another writer came first); keeps the keys before and after."""

    def __init__(self, secret: str, change: Callable[[Keys, float], Keys], ttl: float) -> None:
        self.secret = secret
        self.change = change
        self.ttl = ttl
        """The gateways' SECRETS_TTL_SECONDS: how long one may hold the keys it read before."""
        self.before: Keys = ()
        self.after: Keys = ()
        self.at = 0.0
        """When the change was made (wall-clock seconds), for the version written last."""

    def __call__(self, text: str) -> str:
        from ..auth.gateway_keys import keys_document

        self.before = _parsed(text, self.secret)
        self.at = time.time()
        self.after = self.change(self.before, self.at)
        return keys_document(self.after)


def _parsed(text: str, secret: str) -> Keys:
    from ..auth.gateway_keys import SecretFormatError, parse_gateway_keys
    from .operator_errors import OperatorError

    try:
        return parse_gateway_keys(text)
    except SecretFormatError as exc:
        # The gateway cannot read it either: nothing is written over it.
        raise OperatorError(
            f"secret {secret} holds no gateway keys the gateway can read ({exc})",
            "fix it as docs/deploy.md#secret-formats says; nothing written",
        ) from None


def _targets(args: argparse.Namespace) -> tuple[Targets, Any, str]:
    from .. import settings
    from .operator_targets import resolve

    targets = resolve(args.stack, args.region)
    if targets.config.auth_mode != settings.AUTH_GATEWAY_KEY:
        say(
            f"note: {settings.ENV_AUTH_MODE} is {targets.config.auth_mode} in {targets.source}: "
            "the gateway checks these keys only in gateway_key mode"
        )
    return targets, targets.client("secretsmanager"), targets.config.gateway_keys_secret


def _missing(client: Any, targets: Targets, secret: str) -> Callable[[Exception], Exception]:
    from .. import settings
    from .operator_errors import OperatorError

    def translate(exc: Exception) -> Exception:
        if not isinstance(exc, client.exceptions.ResourceNotFoundException):
            return exc
        step = (
            "check --stack and --region"
            if targets.stack
            else "run `policy-gateway init --secrets` (or pass --stack NAME for a deployed gateway)"
        )
        return OperatorError(
            f"secret {secret} ({settings.ENV_GATEWAY_KEYS_SECRET}, named by {targets.source}) "
            "does not exist",
            step,
        )

    return translate


def _write(args: argparse.Namespace, change: Callable[[Keys, float], Keys]) -> tuple[_Change, str]:
    """The change as written, and when running gateways will have seen it."""
    from .. import settings
    from .secret_versions import update

    targets, client, secret = _targets(args)
    applied = _Change(secret, change, targets.config.secrets_ttl)
    try:
        update(client, secret, applied)
    except Exception as exc:
        raise _missing(client, targets, secret)(exc) from None
    migrated = sum(key.plain for key in applied.before)
    if migrated:
        say(f"rewrote {migrated} key(s) kept in plain text as digests")
    return applied, (
        f"running gateways see it within {targets.config.secrets_ttl:g} s "
        f"({targets.setting_source(settings.ENV_SECRETS_TTL)})"
    )


def _when(moment: float | None) -> str:
    from ..auth.gateway_keys import iso_time

    return iso_time(moment) or "never"


def add(args: argparse.Namespace) -> int:
    from . import key_changes

    name = key_changes.checked_name(args.name)
    groups = tuple(key_changes.checked_name(group, "group") for group in args.group)
    now = time.time()
    expires = key_changes.expiry(args.expires, now) if args.expires else None
    key = key_changes.new_key()
    _, in_force = _write(
        args, lambda keys, at: key_changes.add(keys, name, key, groups, at, expires)
    )
    print(key, flush=True)
    say(
        f"added key {name!r} (groups: {', '.join(groups) or 'none'}; expires: {_when(expires)}); "
        f"the key above is shown this once; {in_force}"
    )
    return 0


def rotate(args: argparse.Namespace) -> int:
    from . import key_changes

    grace = key_changes.duration(args.grace)
    now = time.time()
    expires = key_changes.expiry(args.expires, now) if args.expires else None
    key = key_changes.new_key()
    applied, in_force = _write(
        args, lambda keys, at: key_changes.rotate(keys, args.name, key, at, grace, expires)
    )
    print(key, flush=True)
    # rotate() appends the new key last; the old ones it ended end from the write on (those
    # that ended before it are kept in the secret for a while too, and are not this one).
    replaced = {old.digest for old in applied.before if old.name == args.name}
    end = min(
        (
            old.expires
            for old in applied.after[:-1]
            if old.digest in replaced and old.expires is not None and old.expires >= applied.at
        ),
        default=applied.at,
    )
    everywhere = key_changes.refused_everywhere(end, applied.at, applied.ttl)
    works = f"the old key works until {_when(end)} (--grace {args.grace})"
    if everywhere <= end:
        works += ", then every running gateway refuses it"
    else:
        works += (
            f" on the gateways that have read this change, and until at most "
            f"{_when(everywhere)} on those that read the keys before it (they hold them for up "
            f"to {applied.ttl:g} s; a --grace of at least that ends it at its end everywhere)"
        )
    say(
        f"rotated {args.name!r}: the new key above is shown this once and works once "
        f"{in_force}; {works}"
    )
    return 0


def revoke(args: argparse.Namespace) -> int:
    from . import key_changes

    applied, in_force = _write(args, lambda keys, at: key_changes.revoke(keys, args.name, at))
    gone = sum(key.name == args.name for key in applied.before)
    say(f"revoked {args.name!r} ({gone} key(s) removed): refused once {in_force}")
    if not applied.after:
        say("no key left: every call is refused until `policy-gateway keys add`")
    return 0


def list_keys(args: argparse.Namespace) -> int:
    import json

    from .. import settings
    from . import key_changes
    from .secret_versions import read_current

    targets, client, secret = _targets(args)
    try:
        current = read_current(client, secret)
    except Exception as exc:
        raise _missing(client, targets, secret)(exc) from None
    keys = _parsed(current.text, secret)
    plain = sum(key.plain for key in keys)
    if plain:
        say(f"{plain} key(s) kept in plain text: any `keys` change rewrites them as digests")
    answer = {
        "secret": secret,
        "keys": key_changes.listing(keys, time.time()),
        "gateway_ttl_seconds": targets.config.secrets_ttl,
        "gateway_ttl_from": targets.setting_source(settings.ENV_SECRETS_TTL),
    }
    print(json.dumps(answer, indent=2))
    return 0


def caller_id(args: argparse.Namespace) -> int:
    from ..auth.authenticator import passthrough_caller
    from .operator_errors import OperatorError

    caller = passthrough_caller(sys.stdin.buffer.read())
    if caller is None:
        raise OperatorError(
            "no key on standard input", "pipe it in: policy-gateway callers id < key.txt", 2
        )
    print(caller)
    return 0


def add_key_commands(commands: Any, targeted: Callable[[argparse.ArgumentParser], None]) -> None:
    """`keys` and `callers` as subcommands of `policy-gateway`; `targeted` adds --stack/--region."""
    from .key_changes import DEFAULT_GRACE

    keys = commands.add_parser(
        "keys", help="add, list, rotate or revoke the gateway keys clients present"
    )
    actions = keys.add_subparsers(dest="action", required=True)
    made = actions.add_parser("add", help="make a key for NAME and print it, this once")
    made.add_argument("name", help="what the logs call the key's holder (`caller`)")
    made.add_argument(
        "--group",
        action="append",
        default=[],
        help="a group the holder belongs to (picks a `group:` chain); repeat for more",
    )
    made.set_defaults(handler=add)
    listed = actions.add_parser("list", help="names, groups, created, expires; never a key")
    listed.set_defaults(handler=list_keys)
    rotated = actions.add_parser(
        "rotate", help="a new key for NAME, printed once; the old one works for --grace"
    )
    rotated.add_argument("name", help="the holder whose key is replaced, as `keys list` names it")
    rotated.add_argument(
        "--grace",
        default=DEFAULT_GRACE,
        help=f"how long the old key keeps working: 30s, 15m, 24h, 7d, 0 (default {DEFAULT_GRACE})",
    )
    rotated.set_defaults(handler=rotate)
    revoked = actions.add_parser(
        "revoke", help="remove every key of NAME (refused within the secrets' TTL)"
    )
    revoked.add_argument("name", help="the holder whose every key is removed")
    revoked.set_defaults(handler=revoke)
    for command in (made, rotated):
        command.add_argument(
            "--expires",
            help="when the new key stops working: a duration (90d) or an ISO 8601 date or "
            "time, UTC unless it names a zone (default: never)",
        )
    for command in (made, listed, rotated, revoked):
        targeted(command)
    callers = commands.add_parser("callers", help="caller ids as the logs show them")
    ids = callers.add_subparsers(dest="action", required=True)
    ids.add_parser(
        "id", help="the passthrough caller id (key:<digest>) of the key on standard input"
    ).set_defaults(handler=caller_id)
