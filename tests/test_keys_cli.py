"""`policy-gateway keys` and `callers id` (issue 34, item 2), run as operators run them, against
moto, and the keys they write used by the official SDK through the real gateway.

The gateway's two clocks are the test's: `clock` times the secrets' TTL,
`wall` is the wall clock a rotated key's end is judged by; neither is slept on.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import anthropic
import boto3
import pytest
from policy_gateway import settings
from policy_gateway.app import create_app
from policy_gateway.auth.gateway_keys import key_digest, keys_document, parse_gateway_keys
from policy_gateway.cli import key_changes
from policy_gateway.cli.secret_versions import read_current, update

from .conftest import KEYS_SECRET, UPSTREAM_KEY, UPSTREAM_SECRET
from .support.cli import cli, status_of
from .support.clock import ManualClock, eventually
from .support.fake_upstream import FakeUpstream
from .support.gateway import GatewayStdout
from .support.sdk import ask, client
from .support.servers import ThreadedServer

TTL = 0.3
DEFAULT_KEY = "gk-default-generated-0123456789abcdef"
TAG = "tests.support.policies:Tag"
DOCUMENT = {
    "policies": [{"policy": TAG, "options": {"tag": "default"}}],
    "callers": {"group:contractors": {"policies": [{"policy": TAG, "options": {"tag": "ctr"}}]}},
}
OPERATOR = {
    settings.ENV_GATEWAY_KEYS_SECRET: KEYS_SECRET,
    settings.ENV_AUTH_MODE: settings.AUTH_GATEWAY_KEY,
    settings.ENV_SECRETS_TTL: str(TTL),
}


@pytest.fixture
def secrets(moto_endpoint: str) -> Any:
    """The keys secret as the template generates it, and the upstream key."""
    manager: Any = boto3.client("secretsmanager")
    manager.create_secret(
        Name=KEYS_SECRET, SecretString=json.dumps({"name": "default", "key": DEFAULT_KEY})
    )
    manager.create_secret(Name=UPSTREAM_SECRET, SecretString=UPSTREAM_KEY)
    return manager


@pytest.fixture
def wall() -> ManualClock:
    return ManualClock(time.time())


@pytest.fixture
def gateway(
    secrets: Any,
    upstream_url: str,
    clock: ManualClock,
    wall: ManualClock,
    gateway_stdout: GatewayStdout,
) -> Iterator[str]:
    """The gateway in gateway_key mode, its output kept in `gateway_stdout`."""
    config = settings.Settings(
        upstream_base_url=upstream_url,
        upstream_max_retries=0,
        auth_mode=settings.AUTH_GATEWAY_KEY,
        gateway_keys_secret=KEYS_SECRET,
        upstream_api_key_secret=UPSTREAM_SECRET,
        secrets_ttl=TTL,
        policy_config=json.dumps(DOCUMENT),
        clock=clock,
    )
    server = ThreadedServer(create_app(config, clock=wall)).start()
    yield server.url
    server.stop()


def keys(*args: str) -> subprocess.CompletedProcess[str]:
    return cli("keys", *args, env=OPERATOR)


def added(*args: str) -> str:
    result = keys(*args)
    assert result.returncode == 0, result.stderr
    (key,) = result.stdout.split()
    return key


def chain_of(url: str, key: str, upstream: FakeUpstream) -> str:
    """Which chain the call ran, with the caller and groups it saw (`Tag`'s stamp)."""
    ask(client(url, api_key=key), False)
    return str(upstream.requests[-1].json["metadata"]["user_id"])


def refused(url: str, key: str) -> bool:
    try:
        ask(client(url, api_key=key), False)
    except anthropic.AuthenticationError:
        return True
    return False


def seen_after_the_ttl(clock: ManualClock, check: Callable[[], bool]) -> None:
    """`check` holds once the gateway's TTL has passed and the re-read it starts has ended:
    a read slower than the refresh wait (a loaded machine) serves the held keys meanwhile,
    so the re-read is waited for in real time; the gateway's clock stays where it is."""
    clock.advance(TTL)
    eventually(check)


def test_a_key_added_by_command_authenticates_and_gets_its_groups_chain(
    gateway: str, secrets: Any, upstream: FakeUpstream, clock: ManualClock
) -> None:
    key = added("add", "alice", "--group", "contractors")
    seen_after_the_ttl(clock, lambda: not refused(gateway, key))
    assert chain_of(gateway, key, upstream) == "ctr|alice|contractors"
    # The generated key still works, under its name, now kept as a digest.
    assert chain_of(gateway, DEFAULT_KEY, upstream) == "default|default|"
    stored = read_current(secrets, KEYS_SECRET).text
    assert key not in stored
    assert DEFAULT_KEY not in stored
    entries = json.loads(stored)["keys"]
    assert [(entry["name"], entry["groups"], entry["expires"]) for entry in entries] == [
        ("default", [], None),
        ("alice", ["contractors"], None),
    ]
    assert entries[1]["sha256"] == key_digest(key).hex()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entries[1]["created"])


def test_keys_list_never_prints_a_key_or_its_digest(secrets: Any) -> None:
    alice = added("add", "alice", "--group", "contractors", "--expires", "30d")
    bob = added("add", "bob")
    rotated = added("rotate", "bob", "--grace", "1h")
    listed = keys("list")
    answer = status_of(listed)
    printed = listed.stdout + listed.stderr
    for secret in (DEFAULT_KEY, alice, bob, rotated):
        assert secret not in printed
        assert key_digest(secret).hex() not in printed
    assert not re.search(r"[0-9a-f]{32}", printed)
    assert [(entry["name"], entry["groups"], entry["state"]) for entry in answer["keys"]] == [
        ("default", [], "valid"),
        ("alice", ["contractors"], "valid"),
        ("bob", [], "valid"),
        ("bob", [], "valid"),
    ]
    assert all(
        set(entry) == {"name", "groups", "created", "expires", "state"} for entry in answer["keys"]
    )
    assert answer["keys"][1]["expires"] is not None
    assert answer["keys"][3]["expires"] is None
    assert answer["gateway_ttl_seconds"] == TTL


def test_a_rotated_key_works_for_its_grace_period_only(
    gateway: str,
    upstream: FakeUpstream,
    clock: ManualClock,
    wall: ManualClock,
    gateway_stdout: GatewayStdout,
) -> None:
    old = added("add", "alice", "--group", "contractors")
    rotation = keys("rotate", "alice", "--grace", "1h")
    assert rotation.returncode == 0, rotation.stderr
    assert "the old key works until" in rotation.stderr
    # A grace longer than the TTL: every gateway reads the end in time, and keeps to it.
    assert "(--grace 1h), then every running gateway refuses it" in rotation.stderr
    new = rotation.stdout.strip()
    seen_after_the_ttl(clock, lambda: not refused(gateway, new))
    assert chain_of(gateway, old, upstream) == "ctr|alice|contractors"
    assert chain_of(gateway, new, upstream) == "ctr|alice|contractors"
    # Judged from the end the command printed (in whole seconds), not from when the test
    # began: the commands before it take seconds of their own on a loaded machine.
    stated = re.search(r"the old key works until (\S+) ", rotation.stderr)
    assert stated is not None, rotation.stderr
    end = datetime.fromisoformat(stated[1]).timestamp()
    assert 3590 < end - wall() < 3660
    wall.advance(end - 5 - wall())
    assert not refused(gateway, old)
    wall.advance(10)
    assert refused(gateway, old)
    assert chain_of(gateway, new, upstream) == "ctr|alice|contractors"
    rejected = [
        line for line in gateway_stdout.lines() if line.get("message") == "gateway key rejected"
    ]
    assert rejected
    assert rejected[-1]["reason"] == "expired"
    assert rejected[-1]["key_name"] == "alice"


def _rejections(gateway_stdout: GatewayStdout) -> list[dict[str, Any]]:
    return [
        line for line in gateway_stdout.lines() if line.get("message") == "gateway key rejected"
    ]


def test_a_rotation_without_grace_states_the_real_bound_and_the_old_key_is_refused_by_name(
    gateway: str,
    upstream: FakeUpstream,
    clock: ManualClock,
    wall: ManualClock,
    gateway_stdout: GatewayStdout,
) -> None:
    """Issue 39, item 5: `--grace 0` printed an end the gateways did not keep to; the key
    worked on for as long as a gateway held the keys it read before the rotation."""
    old = added("add", "alice")
    # The gateway holds a copy of the keys in which alice's key never ends.
    seen_after_the_ttl(clock, lambda: not refused(gateway, old))
    rotation = keys("rotate", "alice", "--grace", "0")
    assert rotation.returncode == 0, rotation.stderr
    stated = re.search(
        r"the old key works until (\S+) \(--grace 0\) on the gateways that have read this "
        rf"change, and until at most (\S+) on those that read the keys before it \(they hold "
        rf"them for up to {TTL:g} s;",
        rotation.stderr,
    )
    assert stated is not None, rotation.stderr
    end, everywhere = (datetime.fromisoformat(moment).timestamp() for moment in stated.groups())
    assert 0 <= everywhere - end <= 1  # the TTL (0.3 s) later, in whole seconds
    # The gateway's wall clock passes the end the secret now holds ...
    wall.advance(time.time() + 1 - wall())
    # ... yet its copy, read before the rotation, still admits the key: that is the bound.
    assert not refused(gateway, old)
    # Once it re-reads, the kept entry refuses the key by its end, naming it.
    seen_after_the_ttl(clock, lambda: refused(gateway, old))
    assert (
        _rejections(gateway_stdout)[-1]["reason"],
        _rejections(gateway_stdout)[-1]["key_name"],
    ) == (
        "expired",
        "alice",
    )
    # A later write keeps the ended entry: the refusal still names the key.
    bob = added("add", "bob")
    seen_after_the_ttl(clock, lambda: not refused(gateway, bob))
    assert refused(gateway, old)
    assert _rejections(gateway_stdout)[-1]["key_name"] == "alice"
    listed = status_of(keys("list"))["keys"]
    assert [(entry["name"], entry["state"]) for entry in listed] == [
        ("default", "valid"),
        ("alice", "expired"),
        ("alice", "valid"),
        ("bob", "valid"),
    ]


def test_a_revoked_key_is_refused_within_the_ttl(
    gateway: str, upstream: FakeUpstream, clock: ManualClock
) -> None:
    key = added("add", "bob")
    seen_after_the_ttl(clock, lambda: not refused(gateway, key))
    revoked = keys("revoke", "bob")
    assert revoked.returncode == 0, revoked.stderr
    assert f"within {TTL:g} s ({settings.ENV_SECRETS_TTL} in " in revoked.stderr
    # The gateway holds what it read until the TTL ends: that is the promised bound.
    assert not refused(gateway, key)
    seen_after_the_ttl(clock, lambda: refused(gateway, key))
    assert not refused(gateway, DEFAULT_KEY)


def test_revoking_the_last_key_refuses_every_call(
    gateway: str, upstream: FakeUpstream, clock: ManualClock
) -> None:
    assert not refused(gateway, DEFAULT_KEY)
    revoked = keys("revoke", "default")
    assert revoked.returncode == 0, revoked.stderr
    assert "no key left" in revoked.stderr
    seen_after_the_ttl(clock, lambda: refused(gateway, DEFAULT_KEY))
    assert len(upstream.requests) == 1


def _adding(name: str) -> Callable[[str], str]:
    key = key_changes.new_key()

    def change(text: str) -> str:
        return keys_document(
            key_changes.add(parse_gateway_keys(text), name, key, (), time.time(), None)
        )

    return change


def test_a_writer_that_read_before_another_wrote_loses_nothing(secrets: Any) -> None:
    """A reads, B writes in full, then A writes: A's swap is refused, A applies its change
    again to B's version, and both keys are in the secret."""
    add_bob = _adding("bob")
    add_alice = _adding("alice")
    seen: list[int] = []

    def alice_with_bob_in_between(text: str) -> str:
        if not seen:
            update(secrets, KEYS_SECRET, add_bob)
        seen.append(len(parse_gateway_keys(text)))
        return add_alice(text)

    update(secrets, KEYS_SECRET, alice_with_bob_in_between, sleep=lambda _: None)
    assert seen == [1, 2]  # alice's change ran again, on the version holding bob
    names = [key.name for key in parse_gateway_keys(read_current(secrets, KEYS_SECRET).text)]
    assert sorted(names) == ["alice", "bob", "default"]


def test_concurrent_writers_lose_nothing(secrets: Any) -> None:
    writers = [f"op-{number}" for number in range(4)]
    start = threading.Barrier(len(writers))
    failures: list[BaseException] = []

    def write(name: str) -> None:
        manager: Any = boto3.client("secretsmanager")
        start.wait()
        try:
            update(manager, KEYS_SECRET, _adding(name))
        except BaseException as exc:  # the test reports it below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(name,)) for name in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    names = [key.name for key in parse_gateway_keys(read_current(secrets, KEYS_SECRET).text)]
    assert sorted(names) == ["default", *writers]


def test_callers_id_matches_the_caller_the_gateway_logs_in_passthrough(
    make_gateway: Callable[..., str], upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    key = "sk-ant-api03-some-client-key-0123456789"
    ask(client(make_gateway(), api_key=key), False)
    (line,) = gateway_stdout.call_lines(1)
    printed = cli("callers", "id", stdin=f"  {key}\n")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == line["caller"]
    assert key not in printed.stdout + printed.stderr
    empty = cli("callers", "id", stdin="\n")
    assert empty.returncode == 2
    assert empty.stderr.startswith("policy-gateway callers: no key on standard input")


def test_keys_refuse_a_missing_secret_in_one_line_naming_init(moto_endpoint: str) -> None:
    result = keys("add", "alice")
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert f"secret {KEYS_SECRET} ({settings.ENV_GATEWAY_KEYS_SECRET}" in line
    assert "policy-gateway init --secrets" in line


def test_keys_refuse_bad_names_and_a_second_key_of_one_name(secrets: Any) -> None:
    assert keys("add", "key:abc").returncode == 2
    assert keys("add", "alice", "--group", "group:x").returncode == 2
    added("add", "alice")
    again = keys("add", "alice")
    assert again.returncode == 2
    assert "keys rotate alice" in again.stderr
    assert keys("revoke", "nobody").returncode == 2
    assert keys("rotate", "alice", "--grace", "soon").returncode == 2
