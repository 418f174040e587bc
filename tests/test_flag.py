"""The flag's cache: off the event loop, fail-closed, one warning per TTL, no stale reads."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from policy_gateway.aws_reads import VersionedParameter
from policy_gateway.fallback.flag import FallbackFlag, parse_flag
from policy_gateway.parameter_batch import ParameterBatch

from .support.clock import ManualClock

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [("true", True), ("TRUE", True), (" True\n", True), ("false", False), ("False", False)],
)
def test_parse_accepts_true_and_false_in_any_case(raw: str, parsed: bool) -> None:
    assert parse_flag(raw) is parsed


@pytest.mark.parametrize("raw", ["yes", "1", "on", "", "tru", "enabled"])
def test_parse_rejects_everything_else(raw: str) -> None:
    assert parse_flag(raw) is None


class Reader:
    """Stands in for the GetParameters call; records which thread it ran on and how often.

    Each value is what one read answers for the flag: its text, None for a missing
    parameter, or the error the whole read raises.
    """

    def __init__(self, *values: str | Exception | None) -> None:
        self.values = list(values)
        self.threads: list[threading.Thread] = []

    def __call__(self, names: Sequence[str]) -> dict[str, VersionedParameter]:
        self.threads.append(threading.current_thread())
        value = self.values.pop(0) if len(self.values) > 1 else self.values[0]
        if isinstance(value, Exception):
            raise value
        return {} if value is None else {"/p": VersionedParameter(value, 1, 0.0)}


def flag_reading(
    reader: Callable[[Sequence[str]], dict[str, VersionedParameter]],
    ttl: float,
    clock: Callable[[], float] = time.monotonic,
) -> FallbackFlag:
    return FallbackFlag("/p", ParameterBatch(ttl, clock, reader))


def test_reads_run_off_the_event_loop_thread() -> None:
    reader = Reader("true")
    flag = flag_reading(reader, 10)

    async def check() -> tuple[bool, threading.Thread]:
        return await flag.enabled(), threading.current_thread()

    enabled, loop_thread = asyncio.run(check())
    assert enabled is True
    assert reader.threads
    assert all(thread is not loop_thread for thread in reader.threads)


def test_value_is_cached_for_the_ttl_and_a_change_is_seen_right_after() -> None:
    reader = Reader("false", "true")
    clock = ManualClock()
    flag = flag_reading(reader, 0.3, clock)

    async def run() -> list[bool]:
        seen = [await flag.enabled() for _ in range(5)]
        clock.advance(0.29)
        seen.append(await flag.enabled())
        clock.advance(0.01)
        seen.append(await flag.enabled())
        return seen

    assert asyncio.run(run()) == [False] * 6 + [True]
    assert len(reader.threads) == 2


def test_errors_mean_off_with_one_warning_and_one_read_per_ttl(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = Reader(RuntimeError("SSM is down"))
    clock = ManualClock()
    flag = flag_reading(reader, 0.3, clock)

    async def run() -> list[bool]:
        seen = [await flag.enabled() for _ in range(10)]
        clock.advance(0.35)
        seen.append(await flag.enabled())
        return seen

    assert asyncio.run(run()) == [False] * 11
    assert len(reader.threads) == 2
    warnings = [r for r in caplog.records if "unreadable" in r.getMessage()]
    assert len(warnings) == 2
    assert all(r.levelname == "WARNING" for r in warnings)
    assert "SSM is down" not in caplog.text


def test_concurrent_calls_after_expiry_share_one_read() -> None:
    calls: list[float] = []

    def slow_reader(names: Sequence[str]) -> dict[str, VersionedParameter]:
        calls.append(time.monotonic())
        time.sleep(0.1)
        return {"/p": VersionedParameter("true", 1, 0.0)}

    flag = flag_reading(slow_reader, 10)

    async def run() -> list[Any]:
        return list(await asyncio.gather(*(flag.enabled() for _ in range(20))))

    assert asyncio.run(run()) == [True] * 20
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("answer", "warning"),
    [(None, "fallback flag missing"), ("yes", "fallback flag has an invalid value")],
    ids=["missing", "invalid"],
)
def test_an_unusable_answer_means_off_with_one_warning_and_one_read_per_ttl(
    caplog: pytest.LogCaptureFixture, answer: str | None, warning: str
) -> None:
    # SSM answered: held for the TTL like any answer (not retried after a back-off).
    reader = Reader(answer)
    clock = ManualClock()
    flag = flag_reading(reader, 30, clock)

    async def run() -> list[bool]:
        seen = []
        for _ in range(10):
            seen.append(await flag.enabled())
            clock.advance(2.0)
        return seen

    assert asyncio.run(run()) == [False] * 10
    assert len(reader.threads) == 1
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith(warning)] == [
        f"{warning}; treating it as off"
    ]
