"""Values from SSM Parameter Store and Secrets Manager, cached with a TTL.

The reads themselves are aws_reads.py's: blocking boto3, so they run in a
worker thread, never on the event loop.

Our cache, not Powertools' (300 s by default), decides when a value is
stale. Every cached AWS value (flag, chain, secrets) follows one refresh rule:
on expiry one refresh runs, however many calls find the value expired; a call
waits for it at most REFRESH_WAIT_SECONDS, and past that the value held keeps
serving while the refresh finishes in the background. So a healthy AWS gives
fresh values on the first call after the TTL, and a stalled one never holds a
call for seconds once a value is held. Only the first read, with nothing to
serve yet, is waited for in full: READ_DEADLINE_SECONDS bounds it.

A value is refreshed ahead of its expiry: the first call that finds it past a
point drawn between REFRESH_AHEAD_EARLIEST and REFRESH_AHEAD_LATEST of its
hold starts the re-read in the background and is served the value held. So
under traffic the re-read has ended before the TTL does, and a change is in
force from TTL + the read's own time on; the random point keeps environments
that loaded together from re-reading together. Outside Lambda `keep_fresh`
does the same without calls (in Lambda nothing runs between invocations).

A failed read is held (as what `on_error` made of it) for a short back-off
instead of the TTL: RETRY_FIRST_SECONDS after the first failure, doubling
with each failure in a row up to RETRY_MAX_SECONDS (never past the TTL). So a
value that appears after start (a secret created, a parameter fixed) is seen
within seconds, and an outage still costs one read per back-off, not one per
request. Each back-off is drawn between half of it and all of it, so
environments throttled together do not retry together.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
import anyio.to_thread

from .observability.logs import logger

T = TypeVar("T")


class ValueFormatError(ValueError):
    """A value read from AWS has no usable shape; the message says why, never the value.

    Its message is therefore safe to log, which is why `keep_last_good` logs it.
    """


# Whatever botocore's timeouts do not cover (DNS, fetching credentials, the
# retry's back-off) cannot make a read last longer than this: past it the read
# counts as failed and its worker thread is abandoned to botocore's timeouts.
READ_DEADLINE_SECONDS = 5.0
# How long a call that finds a held value expired waits for the refresh
# before that value serves: long enough for a healthy SSM (tens of ms), short
# enough that a stalled one is not felt.
REFRESH_WAIT_SECONDS = 0.25
# How long a failed read is held before the next one: short, because the value
# may be about to appear (an operator just created it), and capped, because an
# outage must not turn into a read per request.
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 10.0
# A back-off is drawn between this share of it and all of it.
RETRY_JITTER_LOWEST = 0.5
# Where in a value's hold its re-read starts ahead of expiry, drawn anew per
# read: late enough that refreshing ahead adds few reads (one per 0.8 TTL
# instead of one per TTL), early enough that a read of a few seconds ends in time.
REFRESH_AHEAD_EARLIEST = 0.75
REFRESH_AHEAD_LATEST = 0.85
# How often `keep_fresh` looks at the clock: a value past its point is re-read
# at most this late (a look costs a comparison).
KEEP_FRESH_POLL_SECONDS = 0.5

# Bumped by `expire_all` (a SnapStart restore): a value read under an older
# generation is stale whatever its TTL says, and is not served while its re-read runs.
_generation = 0


def expire_all() -> None:
    """Make every held value stale: the next `get` of each waits for its re-read.

    The value held serves again only as its `on_error` says, when the re-read fails.
    """
    global _generation
    _generation += 1


def keep_last_good(secret: str, exc: Exception, last: T | None) -> T | None:
    """A secret cache's `on_error`: keep serving what was last read, and say so."""
    logger.error(
        "secret unreadable; keeping the last good value"
        if last is not None
        else "secret unreadable and never read; refusing calls until it is",
        extra={
            "secret": secret,
            "error_type": type(exc).__name__,
            # Its message names what is wrong with the secret, never its value.
            **({"reason": str(exc)} if isinstance(exc, ValueFormatError) else {}),
        },
    )
    return last


class TTLCache(Generic[T]):
    """One value, loaded off the loop by `load` and kept for `ttl` seconds (by `clock`).

    When `load` fails or outlasts `deadline`, `on_error(exc, last)` decides
    what the cache holds until the next refresh, one back-off later (see
    `retry_after`), and is the place to log;
    `last` is the last value that loaded successfully, if any. A slow read is
    no error: the value held keeps serving until the read ends one way or the
    other. From a point late in its hold on, a call starts the re-read and is
    served the value held (see the module's docstring).
    """

    def __init__(
        self,
        load: Callable[[], T],
        ttl: float,
        on_error: Callable[[Exception, T | None], T],
        clock: Callable[[], float] = time.monotonic,
        wait: float = REFRESH_WAIT_SECONDS,
        deadline: float = READ_DEADLINE_SECONDS,
        draw: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self._load = load
        self._ttl = ttl
        self._on_error = on_error
        self._clock = clock
        self._wait = wait
        self._deadline = deadline
        # Where in a range the refresh-ahead point and a back-off fall (tests pin it).
        self._draw = draw
        self._value: T | None = None
        self._held = False
        self._last_good: T | None = None
        self._expires = float("-inf")
        self._ahead = float("-inf")
        self._generation = _generation
        self._failures = 0
        self._refreshing: asyncio.Task[None] | None = None

    async def get(self) -> T:
        current = self._generation == _generation
        now = self._clock()
        if current and now < self._expires:
            if now >= self._ahead:
                self._refresh_started()
            return self._value  # type: ignore[return-value]
        # asyncio.wait never cancels the refresh: a call that stops waiting, or
        # is cancelled, leaves it running for the next one.
        await asyncio.wait(
            {self._refresh_started()}, timeout=self._wait if self._held and current else None
        )
        return self._value  # type: ignore[return-value]

    async def keep_fresh(self) -> None:
        """Refresh ahead without calls, until cancelled: `get` finds the value fresh.

        Only where the process runs between calls (`serve`): in Lambda it would
        sleep through each freeze, and from a SnapStart snapshot it would wake
        in every restored environment at once.
        """
        while True:
            if self._generation != _generation or self._clock() >= self._ahead:
                await asyncio.wait({self._refresh_started()})
            await asyncio.sleep(KEEP_FRESH_POLL_SECONDS)

    def _refresh_started(self) -> asyncio.Task[None]:
        """The refresh under way, started now if none is."""
        if self._refreshing is None:
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh())
        return self._refreshing

    async def _refresh(self) -> None:
        self._generation = _generation
        try:
            with anyio.fail_after(self._deadline):
                value = await anyio.to_thread.run_sync(self._load, abandon_on_cancel=True)
        except Exception as exc:
            value = self._on_error(exc, self._last_good)
            self._failures += 1
            # A back-off is already a short wait: no refresh ahead of its end.
            hold = ahead = retry_after(self._failures, self._ttl) * self._draw(
                RETRY_JITTER_LOWEST, 1.0
            )
        else:
            self._last_good = value
            self._failures = 0
            hold = self._ttl
            ahead = hold * self._draw(REFRESH_AHEAD_EARLIEST, REFRESH_AHEAD_LATEST)
        finally:
            self._refreshing = None
        self._value = value
        self._held = True
        now = self._clock()
        self._expires = now + hold
        self._ahead = now + ahead


def retry_after(failures: int, ttl: float) -> float:
    """How long the `failures`-th failed read in a row is held: doubling, capped, within the TTL."""
    # The exponent stops growing once the cap is passed, so a long outage never overflows it.
    doubled = RETRY_FIRST_SECONDS * 2.0 ** min(failures - 1, 32)
    return min(doubled, RETRY_MAX_SECONDS, ttl)
