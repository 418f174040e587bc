"""Long loops over a request, taken in turns so other calls on the same loop get theirs.

The gateway runs every call's request hooks on one worker loop. A hook that
walks 200,000 text blocks in one go holds that loop, and every call queued
behind it, for as long as the walk takes; the interpreter lock passing to
other threads (as `subn_in_windows` lets it) does not help a call waiting on
the same loop. A loop that goes through `in_turns` hands the event loop back
once a turn's time is up, so a small call beside the largest body waits a few
milliseconds, not the whole walk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from itertools import islice
from typing import TypeVar

T = TypeVar("T")

TURN_SECONDS = 0.005
"""How long a loop runs before it lets the event loop run others."""

BATCH = 64
"""Items between two looks at the clock: cheap next to the items' own work."""

STEPS = 4096
"""Items between two looks at the clock for a loop whose steps are a few dict lookups each."""

Clock = Callable[[], float]


async def in_turns(
    items: Iterable[T],
    *,
    batch: int = BATCH,
    clock: Clock = time.perf_counter,
    turn: float | None = None,
) -> AsyncIterator[list[T]]:
    """`items` in lists of `batch`; between two, the event loop runs others once `turn`
    (TURN_SECONDS by default) is up."""
    turn = TURN_SECONDS if turn is None else turn
    iterator = iter(items)
    started = clock()
    while taken := list(islice(iterator, batch)):
        yield taken
        if clock() - started >= turn:
            await asyncio.sleep(0)
            started = clock()
