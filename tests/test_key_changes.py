"""The keys secret's digest format, what `policy-gateway keys` does to it, and the expiry the
authenticator honours, judged by an injected wall clock (issue 34, item 2)."""

from __future__ import annotations

import json

import anyio
import pytest
from policy_gateway.auth.authenticator import (
    GatewayKeyAuth,
    PassthroughAuth,
    key_caller,
    passthrough_caller,
)
from policy_gateway.auth.gateway_keys import (
    GatewayKey,
    SecretFormatError,
    key_digest,
    keys_document,
    parse_gateway_keys,
)
from policy_gateway.cli import key_changes
from policy_gateway.cli.operator_errors import OperatorError
from policy_gateway.errors import GatewayError

from .support.clock import ManualClock

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
HOUR = 3600.0
OLD, NEW, NEWER = "gk-old-0123456789abcdef", "gk-new-0123456789abcdef", "gk-newer-0123456789abc"


def test_what_the_commands_write_reads_back_as_digests_with_their_times() -> None:
    keys = (
        GatewayKey(key_digest(OLD), "alice", ("contractors",), NOW, NOW + HOUR),
        GatewayKey(key_digest(NEW), "bob", (), NOW, None),
    )
    text = keys_document(keys)
    assert OLD not in text
    assert NEW not in text
    assert parse_gateway_keys(text) == keys
    entry = json.loads(text)["keys"][0]
    assert entry["created"] == "2027-01-15T08:00:00Z"
    assert entry["expires"] == "2027-01-15T09:00:00Z"
    assert not any(key.plain for key in parse_gateway_keys(text))
    assert all(key.plain for key in parse_gateway_keys(json.dumps({"name": "d", "key": OLD})))


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"name": "a", "sha256": "ab"}, "sha256 must be 64 hex digits"),
        ({"name": "a", "sha256": "zz" * 32}, "sha256 must be 64 hex digits"),
        ({"name": "a", "sha256": "ab" * 32, "key": OLD}, "must be"),
        ({"name": "a", "sha256": "ab" * 32, "expires": "2030-01-01T00:00:00"}, "with a zone"),
        ({"name": "a", "sha256": "ab" * 32, "created": "yesterday"}, "with a zone"),
        ({"name": "a", "key": OLD, "expires": 5}, "with a zone"),
    ],
    ids=["short", "not-hex", "key-and-digest", "no-zone", "not-a-time", "number"],
)
def test_a_bad_entry_refuses_the_secret_naming_the_key_never_its_value(
    entry: dict[str, object], problem: str
) -> None:
    with pytest.raises(SecretFormatError, match=problem) as caught:
        parse_gateway_keys(json.dumps({"keys": [entry]}))
    assert OLD not in str(caught.value)


def test_an_empty_list_is_no_key_at_all() -> None:
    assert parse_gateway_keys('{"keys": []}') == ()
    assert parse_gateway_keys("[]") == ()


def test_a_rotation_ends_the_old_key_after_the_grace_and_keeps_the_groups() -> None:
    keys = key_changes.add((), "alice", OLD, ("contractors",), NOW, None)
    rotated = key_changes.rotate(keys, "alice", NEW, NOW + 10, HOUR, None)
    assert [(key.digest, key.groups, key.expires) for key in rotated] == [
        (key_digest(OLD), ("contractors",), NOW + 10 + HOUR),
        (key_digest(NEW), ("contractors",), None),
    ]
    # A second rotation within the grace never lengthens the first one's.
    again = key_changes.rotate(rotated, "alice", NEWER, NOW + 20, 2 * HOUR, None)
    assert [key.expires for key in again] == [NOW + 10 + HOUR, NOW + 20 + 2 * HOUR, None]
    # With no grace the old key ends at once, and stays in the secret with its end, so every
    # gateway that reads it refuses the key as expired, by name.
    at_once = key_changes.rotate(keys, "alice", NEW, NOW, 0.0, None)
    assert [(key.digest, key.expires) for key in at_once] == [
        (key_digest(OLD), NOW),
        (key_digest(NEW), None),
    ]


def test_writes_keep_an_ended_key_a_week_and_revoke_removes_keys_in_grace_too() -> None:
    keys = key_changes.add((), "alice", OLD, (), NOW, NOW + 60)
    keys = key_changes.add(keys, "bob", NEW, (), NOW, None)
    later = key_changes.add(keys, "carol", NEWER, (), NOW + 61, None)
    assert [(key.name, key.expired(NOW + 61)) for key in later] == [
        ("alice", True),
        ("bob", False),
        ("carol", False),
    ]
    week = NOW + 60 + key_changes.EXPIRED_KEPT_SECONDS
    assert [key.name for key in key_changes.add(keys, "dan", NEWER, (), week - 1, None)] == [
        "alice",
        "bob",
        "dan",
    ]
    assert [key.name for key in key_changes.add(keys, "dan", NEWER, (), week, None)] == [
        "bob",
        "dan",
    ]
    rotated = key_changes.rotate(keys, "bob", NEWER, NOW, HOUR, None)
    assert [key.name for key in key_changes.revoke(rotated, "bob", NOW)] == ["alice"]
    with pytest.raises(OperatorError, match="no valid key named 'nobody'"):
        key_changes.revoke(keys, "nobody", NOW)
    with pytest.raises(OperatorError, match="a valid key named 'bob' exists"):
        key_changes.add(keys, "bob", NEWER, (), NOW, None)
    # An expired name is free again.
    assert key_changes.add(keys, "alice", NEWER, (), NOW + 60, None)


def test_an_ended_key_is_refused_everywhere_at_the_later_of_its_end_and_the_ttl() -> None:
    """A gateway that read the keys before the rotation holds a copy where the old key never
    ends, until its re-read within the TTL: the bound `keys rotate` states."""
    assert key_changes.refused_everywhere(NOW, NOW, 60.0) == NOW + 60
    assert key_changes.refused_everywhere(NOW + HOUR, NOW, 60.0) == NOW + HOUR


def test_the_listing_shows_neither_key_nor_digest() -> None:
    keys = key_changes.add((), "alice", OLD, ("g",), NOW, NOW + 60)
    (shown,) = key_changes.listing(keys, NOW + 60)
    assert shown == {
        "name": "alice",
        "groups": ["g"],
        "created": "2027-01-15T08:00:00Z",
        "expires": "2027-01-15T08:01:00Z",
        "state": "expired",
    }


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("30s", 30.0), ("15m", 900.0), ("24h", 86400.0), ("7d", 604800.0), ("90", 90.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert key_changes.duration(text) == seconds


def test_expiry_is_a_duration_or_a_time_and_never_past() -> None:
    assert key_changes.expiry("1h", NOW) == NOW + HOUR
    assert key_changes.expiry("2030-01-01", NOW) == 1_893_456_000.0
    assert key_changes.expiry("2030-01-01T01:00:00+01:00", NOW) == 1_893_456_000.0
    for bad in ("2020-01-01", "soon", "-5m"):
        with pytest.raises(OperatorError) as caught:
            key_changes.expiry(bad, NOW)
        assert caught.value.exit_code == 2


def test_the_authenticator_refuses_a_key_from_its_expiry_on() -> None:
    keys = key_changes.rotate(key_changes.add((), "a", OLD, (), NOW, None), "a", NEW, NOW, 60, None)
    wall = ManualClock(NOW)
    auth = GatewayKeyAuth(
        "keys", None, ttl=HOUR, reader=lambda _: keys_document(keys), clock=ManualClock(), now=wall
    )

    async def caller(key: str) -> str | int | None:
        try:
            return (await auth.authorize([(b"x-api-key", key.encode())])).caller
        except GatewayError as exc:
            return exc.status

    async def calls() -> list[str | int | None]:
        seen = [await caller(OLD)]
        wall.advance(59.9)
        seen.append(await caller(OLD))
        wall.advance(0.1)
        return [*seen, await caller(OLD), await caller(NEW)]

    assert anyio.run(calls) == ["a", "a", 401, "a"]


def test_callers_id_reads_a_key_as_the_passthrough_header_is_read() -> None:
    async def logged(value: bytes) -> str | None:
        return (await PassthroughAuth().authorize([(b"x-api-key", value)])).caller

    for typed in (b"sk-ant-k", b"  sk-ant-k\n", b"\tsk-ant-k \r\n"):
        assert passthrough_caller(typed) == key_caller(b"sk-ant-k")
        assert passthrough_caller(typed) == anyio.run(logged, typed)
    assert passthrough_caller(b" \n") is None
