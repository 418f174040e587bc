"""The cache every AWS value goes through: one refresh at a time, stale while it runs, bounded.

Time is injected: the TTL runs on a `Clock` the test moves, and a read that
stalls is a worker thread waiting on an event the test sets. The only real
time measured is the bounds themselves (the refresh wait and the deadline).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import anyio
import pytest
from policy_gateway.aws_reads import (
    CONNECT_TIMEOUT_SECONDS,
    READ_TIMEOUT_SECONDS,
    TOTAL_ATTEMPTS,
    aws_config,
)
from policy_gateway.parameters import (
    READ_DEADLINE_SECONDS,
    REFRESH_AHEAD_EARLIEST,
    REFRESH_AHEAD_LATEST,
    REFRESH_WAIT_SECONDS,
    RETRY_FIRST_SECONDS,
    RETRY_JITTER_LOWEST,
    RETRY_MAX_SECONDS,
    TTLCache,
    expire_all,
    retry_after,
)

pytestmark = pytest.mark.unit

TTL = 30.0
# Generous for a worker thread to answer an event on a busy machine, and still
# far below the deadline a stalled read would run into.
PROMPT = 2.0


def latest(low: float, high: float) -> float:
    """A TTLCache's `draw` without jitter: each point at the end of its range."""
    return high


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Source:
    """The value AWS holds; `stall()` makes every read wait until `answer()`."""

    value: object = 1
    error: Exception | None = None
    reads: int = 0
    answered: int = 0
    _open: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._open.set()

    def stall(self) -> None:
        self._open.clear()

    def answer(self) -> None:
        self._open.set()

    def __call__(self) -> object:
        self.reads += 1
        self._open.wait()
        self.answered += 1
        if self.error is not None:
            raise self.error
        return self.value


@dataclass
class Errors:
    """An `on_error` that keeps the last good value and remembers what it was told."""

    seen: list[type[Exception]] = field(default_factory=list)

    def __call__(self, exc: Exception, last: object) -> object:
        self.seen.append(type(exc))
        return last


@pytest.fixture
def source() -> Iterator[Source]:
    """The tests' AWS; answered at the end, so no stalled read outlives its test."""
    stalled = Source()
    yield stalled
    stalled.answer()


POLL = 0.01


async def until(done: Callable[[], bool]) -> None:
    """Poll on the loop (where a refresh lands) until `done()` holds, for at most PROMPT."""
    for _ in range(int(PROMPT / POLL)):
        if done():
            return
        await anyio.sleep(POLL)
    raise AssertionError("not done in time")


async def fresh(cache: TTLCache[object], value: object) -> None:
    """Poll until the cache serves `value`: its background refresh has landed."""
    for _ in range(int(PROMPT / POLL)):
        if await cache.get() == value:
            return
        await anyio.sleep(POLL)
    raise AssertionError(f"{value!r} never served")


def test_the_config_makes_two_attempts_in_all_within_short_timeouts() -> None:
    config = aws_config()
    assert config.retries == {"total_max_attempts": TOTAL_ATTEMPTS, "mode": "standard"}
    assert TOTAL_ATTEMPTS == 2
    assert (config.connect_timeout, config.read_timeout) == (
        CONNECT_TIMEOUT_SECONDS,
        READ_TIMEOUT_SECONDS,
    )
    # Two stalled attempts and the back-off between them (at most 1 s) fit the deadline.
    assert TOTAL_ATTEMPTS * (CONNECT_TIMEOUT_SECONDS + READ_TIMEOUT_SECONDS) <= (
        READ_DEADLINE_SECONDS + CONNECT_TIMEOUT_SECONDS
    )


def test_a_value_is_read_once_until_its_refresh_ahead_point(source: Source) -> None:
    clock = Clock()
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), clock, draw=latest)

    async def run() -> None:
        assert [await cache.get() for _ in range(5)] == [1] * 5
        assert source.reads == 1
        clock.now += TTL * REFRESH_AHEAD_LATEST - 0.001
        source.value = 2
        assert await cache.get() == 1
        assert source.reads == 1
        clock.now += TTL * (1 - REFRESH_AHEAD_LATEST) + 0.001
        # Nobody called between the refresh-ahead point and the TTL: a healthy
        # source answers within the refresh wait, so the change is seen at once.
        assert await cache.get() == 2
        assert source.reads == 2

    anyio.run(run)


def test_under_traffic_a_slow_read_ends_before_the_ttl_so_the_change_is_in_force_at_once(
    source: Source,
) -> None:
    """Issue 34: a read slower than the refresh wait used to leave the old value serving past
    the TTL; started ahead of expiry, it has landed by then. `wait=0`: a call never waits."""
    clock = Clock()
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), clock, wait=0, draw=latest)

    async def run() -> None:
        assert await cache.get() == 1
        loaded = clock.now
        clock.now += 1.0
        source.value = 2  # the change, 1 s after the load
        changed = clock.now
        clock.now = loaded + TTL * REFRESH_AHEAD_LATEST
        source.stall()  # a read that takes seconds of the clock
        assert await cache.get() == 1  # the re-read starts, the held value serves
        await until(lambda: source.reads == 2)
        clock.now += 2.0
        assert await cache.get() == 1  # still reading: still the held value, no second read
        source.answer()
        await fresh(cache, 2)
        clock.now = changed + TTL + 1.0
        assert await cache.get() == 2
        assert source.reads == 2

    anyio.run(run)


def test_refreshing_ahead_reads_about_once_per_ttl_under_steady_traffic(source: Source) -> None:
    """One read per refresh, a refresh per REFRESH_AHEAD_EARLIEST..LATEST of the TTL."""
    clock = Clock()
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), clock, wait=0)
    ttls = 10

    async def run() -> None:
        for _ in range(int(ttls * TTL)):  # a call a second
            clock.now += 1.0
            await cache.get()
            await until(lambda: source.answered == source.reads)
            await anyio.sleep(POLL)  # the answer lands in the cache

    anyio.run(run)
    assert ttls / REFRESH_AHEAD_LATEST - 1 <= source.reads <= ttls / REFRESH_AHEAD_EARLIEST + 1


def test_environments_throttled_together_retry_apart() -> None:
    """A failed read's back-off is jittered: caches failing at the same instant (many
    Lambda environments throttled by one quota) do not re-read in lockstep."""
    clock = Clock()
    sources = [Source(error=RuntimeError("ThrottlingException")) for _ in range(20)]
    caches: list[TTLCache[object]] = [TTLCache(s, TTL, Errors(), clock) for s in sources]
    retried_at: dict[int, float] = {}

    async def run() -> None:
        for cache in caches:
            await cache.get()
        step = 0.01
        while len(retried_at) < len(caches) and clock.now < 1000.0 + RETRY_FIRST_SECONDS * 2:
            clock.now += step
            for index, (cache, read) in enumerate(zip(caches, sources, strict=True)):
                await cache.get()
                if read.reads == 2:
                    retried_at.setdefault(index, clock.now)

    anyio.run(run)
    assert len(retried_at) == len(caches)
    times = sorted(retried_at.values())
    # Each within its first back-off, drawn between half of it and all of it...
    assert times[0] >= 1000.0 + RETRY_FIRST_SECONDS * RETRY_JITTER_LOWEST - 0.02
    assert times[-1] <= 1000.0 + RETRY_FIRST_SECONDS + 0.02
    # ...and spread over it, not landing together.
    assert len({round(t, 2) for t in times}) >= 10
    assert times[-1] - times[0] >= RETRY_FIRST_SECONDS * (1 - RETRY_JITTER_LOWEST) / 2


def test_concurrent_first_reads_share_one_read(source: Source) -> None:
    source.stall()
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), Clock())

    async def run() -> list[object]:
        waiting = [asyncio.ensure_future(cache.get()) for _ in range(20)]
        await asyncio.sleep(0.05)
        assert not any(task.done() for task in waiting)
        source.answer()
        return list(await asyncio.gather(*waiting))

    assert asyncio.run(run()) == [1] * 20
    assert source.reads == 1


def test_an_expired_value_serves_at_once_while_one_refresh_runs(source: Source) -> None:
    clock = Clock()
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), clock, wait=0)

    async def run() -> None:
        assert await cache.get() == 1
        clock.now += TTL
        source.stall()
        source.value = 2
        started = time.monotonic()
        served = await asyncio.gather(*(cache.get() for _ in range(50)))
        assert time.monotonic() - started < PROMPT
        assert served == [1] * 50
        await until(lambda: source.reads == 2)  # the refresh's thread started its read
        assert await asyncio.gather(*(cache.get() for _ in range(50))) == [1] * 50
        assert source.reads == 2  # one refresh, however many calls found the value expired
        source.answer()
        await fresh(cache, 2)
        assert source.reads == 2

    anyio.run(run)


def test_a_stalled_refresh_holds_a_call_no_longer_than_the_refresh_wait(source: Source) -> None:
    clock = Clock()
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), clock)

    async def run() -> None:
        assert await cache.get() == 1
        clock.now += TTL
        source.stall()
        started = time.monotonic()
        assert await cache.get() == 1
        waited = time.monotonic() - started
        assert REFRESH_WAIT_SECONDS * 0.9 <= waited < REFRESH_WAIT_SECONDS + PROMPT
        assert source.reads == 2
        source.answer()

    anyio.run(run)


def test_a_failed_refresh_keeps_what_on_error_decides_until_the_next_ttl(source: Source) -> None:
    clock, errors = Clock(), Errors()
    cache: TTLCache[object] = TTLCache(source, TTL, errors, clock)

    async def run() -> None:
        assert await cache.get() == 1
        clock.now += TTL
        source.error = RuntimeError("throttled")
        assert await cache.get() == 1  # the last good value
        assert [await cache.get() for _ in range(5)] == [1] * 5
        assert (source.reads, errors.seen) == (2, [RuntimeError])  # one read per TTL
        clock.now += TTL
        source.error = None
        source.value = 3
        assert await cache.get() == 3

    anyio.run(run)


def test_a_failed_read_is_retried_after_a_doubling_back_off_capped_below_the_ttl(
    source: Source,
) -> None:
    """A value that appears after start (a secret created) is seen within seconds, not a TTL."""
    clock, errors = Clock(), Errors()
    source.error = RuntimeError("ResourceNotFoundException")
    cache: TTLCache[object] = TTLCache(source, TTL, errors, clock, draw=latest)
    expected_waits = [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert (RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS) == (1.0, 10.0)

    async def run() -> None:
        assert await cache.get() is None
        for reads, wait in enumerate(expected_waits, start=2):
            clock.now += wait - 0.01
            assert await cache.get() is None
            assert source.reads == reads - 1  # still held: the back-off has not run out
            clock.now += 0.01
            assert await cache.get() is None
            assert source.reads == reads
        source.error = None
        clock.now += RETRY_MAX_SECONDS
        assert await cache.get() == 1  # created after start: seen at the next retry
        reads = source.reads
        clock.now += TTL * REFRESH_AHEAD_LATEST - 0.01
        assert await cache.get() == 1
        assert source.reads == reads  # a good value is kept until its refresh-ahead point
        clock.now += TTL * (1 - REFRESH_AHEAD_LATEST)
        clock.now += TTL
        source.error = RuntimeError("throttled")
        assert await cache.get() == 1  # the last good value, retried a second later
        clock.now += RETRY_FIRST_SECONDS
        source.error = None
        source.value = 2
        assert await cache.get() == 2

    anyio.run(run)


def test_the_back_off_never_exceeds_the_ttl_nor_overflows() -> None:
    assert retry_after(1, ttl=0.5) == 0.5
    assert retry_after(3, ttl=TTL) == 4.0
    assert retry_after(100_000, ttl=TTL) == RETRY_MAX_SECONDS


def test_on_error_may_refuse_the_last_good_value(source: Source) -> None:
    """The flag's rule: an error means off, whatever was read before."""
    clock = Clock()
    source.value = True
    cache: TTLCache[object] = TTLCache(source, TTL, lambda exc, last: False, clock)

    async def run() -> None:
        assert await cache.get() is True
        clock.now += TTL
        source.error = RuntimeError("down")
        assert await cache.get() is False

    anyio.run(run)


def test_a_stalled_refresh_that_never_answers_ends_as_an_error(source: Source) -> None:
    clock, errors = Clock(), Errors()
    cache: TTLCache[object] = TTLCache(source, TTL, errors, clock, wait=0, deadline=0.2)

    async def run() -> None:
        assert await cache.get() == 1
        clock.now += TTL
        source.stall()
        source.value = 2
        assert await cache.get() == 1
        await until(lambda: bool(errors.seen))
        assert errors.seen == [TimeoutError]
        assert await cache.get() == 1  # kept until the next TTL, without another read
        assert source.reads == 2

    anyio.run(run)


def test_the_first_read_gives_up_at_the_deadline(source: Source) -> None:
    errors = Errors()
    source.stall()
    deadline = 0.3
    cache: TTLCache[object] = TTLCache(source, TTL, errors, Clock(), deadline=deadline)

    async def run() -> tuple[object, float]:
        started = time.monotonic()
        value = await cache.get()
        return value, time.monotonic() - started

    value, waited = anyio.run(run)
    assert value is None  # nothing good was ever read: on_error's answer
    assert errors.seen == [TimeoutError]
    assert deadline <= waited < deadline + PROMPT


@pytest.mark.parametrize("wait", [0, REFRESH_WAIT_SECONDS])
def test_a_cancelled_caller_leaves_the_refresh_running(source: Source, wait: float) -> None:
    clock = Clock()
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), clock, wait=wait)

    async def run() -> None:
        assert await cache.get() == 1
        clock.now += TTL
        source.stall()
        source.value = 2
        with anyio.move_on_after(0.01):
            await cache.get()
        source.answer()
        await fresh(cache, 2)
        assert source.reads == 2

    anyio.run(run)


def test_after_expire_all_a_held_value_waits_for_its_reread(source: Source) -> None:
    """A SnapStart restore: the value from the snapshot does not serve while it is re-read."""
    cache: TTLCache[object] = TTLCache(source, TTL, Errors(), Clock(), wait=0)

    async def run() -> None:
        assert await cache.get() == 1
        source.stall()
        source.value = 2
        expire_all()
        reading = asyncio.ensure_future(cache.get())
        await until(lambda: source.reads == 2)
        await asyncio.sleep(0.05)
        assert not reading.done()  # wait=0, yet the held value is not served
        source.answer()
        assert await reading == 2
        assert await cache.get() == 2
        assert source.reads == 2

    asyncio.run(run())


def test_after_expire_all_a_failed_reread_serves_what_on_error_keeps(source: Source) -> None:
    errors = Errors()
    cache: TTLCache[object] = TTLCache(source, TTL, errors, Clock())

    async def run() -> None:
        assert await cache.get() == 1
        source.error = ConnectionError("SSM unreachable")
        expire_all()
        assert await cache.get() == 1
        assert errors.seen == [ConnectionError]
        assert source.reads == 2

    asyncio.run(run())
