"""A refused call leaves nothing behind: each refusal is a fresh error, so an outage that
refuses every call never keeps the refused calls' frames (their bodies, their credentials)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable

import pytest
from policy_gateway.auth.authenticator import GatewayKeyAuth
from policy_gateway.auth.upstream_key import UpstreamKey
from policy_gateway.errors import GatewayError
from policy_gateway.policy_source import PolicySource

pytestmark = pytest.mark.unit

CALLS = 200
KEY_HEADERS = [(b"x-api-key", b"gk-one-0123456789abcdef")]


class Secret:
    """Stands in for a request's credentials: something a held frame would keep alive."""


def refuse_many(refuse: Callable[[], Awaitable[object]]) -> tuple[list[GatewayError], int]:
    """Refuse CALLS calls; the errors, and how many of the calls' locals are still alive."""
    alive: list[weakref.ref[Secret]] = []

    async def one_call() -> GatewayError:
        credentials = Secret()
        alive.append(weakref.ref(credentials))
        try:
            await refuse()
        except GatewayError as exc:
            return exc
        raise AssertionError("the call was not refused")

    async def run() -> list[GatewayError]:
        return [await one_call() for _ in range(CALLS)]

    errors = asyncio.run(run())
    last = errors[-1]
    del errors[:-1]
    gc.collect()
    held = sum(ref() is not None for ref in alive)
    return [last], held


def frames(error: BaseException) -> int:
    count, tb = 0, error.__traceback__
    while tb is not None:
        count, tb = count + 1, tb.tb_next
    return count


def unreadable(name: str) -> str:
    raise OSError(f"{name} unreadable")


def keys_only(name: str) -> str:
    if name == "keys":
        return '{"gk-one-0123456789abcdef": "one"}'
    raise OSError("upstream key unreadable")


@pytest.mark.parametrize(
    ("reader", "why"),
    [(unreadable, "gateway keys unreadable"), (keys_only, "upstream key unreadable")],
)
def test_credential_refusals_are_fresh_errors(reader: Callable[[str], str], why: str) -> None:
    auth = GatewayKeyAuth("keys", UpstreamKey("upstream", 60, reader), ttl=60, reader=reader)
    (last,), held = refuse_many(lambda: auth.authorize(KEY_HEADERS))
    assert last.status == 500, why
    assert frames(last) <= 5, f"{why}: the last refusal carries {frames(last)} frames"
    assert held <= 1, f"{why}: {held} refused calls' locals are still alive"


def test_no_chain_refusals_are_fresh_errors() -> None:
    source = PolicySource(inline="{not json", parameter=None)
    (last,), held = refuse_many(source.loaded)
    assert last.status == 500
    assert frames(last) <= 5, f"the last refusal carries {frames(last)} frames"
    assert held <= 1, f"{held} refused calls' locals are still alive"
