"""The fallback budget: at most FALLBACK_BUDGET fallbacks per caller per window.

A repair that costs an upstream call (the retry ladder's repair rung) spends
from the same budget, so a caller cannot multiply its upstream calls through
repairs beyond the fallbacks it is allowed.

The passthrough fallback is fail-open for request-side policies, so a caller
who can make the policy-modified request fail while the original succeeds
could otherwise drop a bypassable policy at will. The budget bounds that to
`FALLBACK_BUDGET` calls per caller per `FALLBACK_BUDGET_WINDOW_SECONDS`.

Windows are fixed (they start at multiples of the window length), so one
counter per caller and window is all the state there is. With
`FALLBACK_BUDGET_TABLE` set, that counter lives in DynamoDB and every
instance shares it: one conditional `UpdateItem` per fallback, made only on
the error path, never on a call that succeeds. Without a table (a laptop,
`serve`), each process keeps its own counters.

The budget fails closed: when the table cannot be reached, is throttled or
answers anything unexpected, the fallback is refused (`budget_unavailable`)
and the call gets the upstream's error, exactly as with the flag off. The
call itself never fails because of the budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from .. import names, settings
from ..observability import metrics
from ..observability.logs import logger
from .budget_table import BudgetUnavailable, DynamoDBStore, window_start

REASON_BUDGET = "budget"
REASON_UNAVAILABLE = "budget_unavailable"

ANONYMOUS = "anonymous"


class BudgetStore(Protocol):
    """One counter per caller and window."""

    async def spend(self, caller: str, start: int, limit: int, expires: int) -> bool:
        """Count one fallback if fewer than `limit` were counted; False when spent.

        Raises BudgetUnavailable when the count cannot be taken.
        """
        ...


class InProcessStore:
    """Counters in this process only: each instance has its own budget."""

    def __init__(self) -> None:
        self._used: dict[tuple[str, int], int] = {}

    async def spend(self, caller: str, start: int, limit: int, expires: int) -> bool:
        if any(window < start for _, window in self._used):
            # Only the current window matters; earlier ones would only grow the map.
            self._used = {key: n for key, n in self._used.items() if key[1] >= start}
        used = self._used.get((caller, start), 0)
        if used >= limit:
            return False
        self._used[(caller, start)] = used + 1
        return True


class FallbackBudget:
    """Decides whether one more fallback is allowed for a caller, and records a refusal."""

    def __init__(
        self,
        limit: int,
        window: int,
        store: BudgetStore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limit = limit
        self.window = window
        self.store = store
        self._clock = clock

    async def allows(self, caller: str | None, *, rung: str = "passthrough fallback") -> bool:
        """Spend one of `caller`'s budget on one more upstream attempt (a fallback or a
        repair: the retry ladder's `rung`); False (and loud) when none is left."""
        caller = caller or ANONYMOUS
        reason = await self._spend(caller)
        if reason is None:
            return True
        metrics.count(names.METRIC_FALLBACK_DENIED)
        logger.warning(
            f"{rung} denied: "
            + (
                "the caller's fallback budget is spent"
                if reason == REASON_BUDGET
                else "the fallback budget could not be checked"
            )
            + "; returning the upstream's error",
            extra={
                "caller": caller,
                "reason": reason,
                "fallback_budget": self.limit,
                "fallback_budget_window_seconds": self.window,
            },
        )
        return False

    async def _spend(self, caller: str) -> str | None:
        if self.limit <= 0:
            return REASON_BUDGET
        start = window_start(self._clock(), self.window)
        # The item outlives its window by one more window, so a clock that runs
        # a little behind on another instance still finds the counter.
        expires = start + 2 * self.window
        try:
            spent = await self.store.spend(caller, start, self.limit, expires)
        except BudgetUnavailable as exc:
            logger.error(
                "fallback budget table unavailable; refusing fallbacks until it answers",
                extra={"error_type": str(exc)},
            )
            return REASON_UNAVAILABLE
        return None if spent else REASON_BUDGET


def from_settings(
    config: settings.Settings, clock: Callable[[], float] = time.time
) -> FallbackBudget:
    store: BudgetStore = (
        DynamoDBStore(config.fallback_budget_table)
        if config.fallback_budget_table
        else InProcessStore()
    )
    return FallbackBudget(config.fallback_budget, config.fallback_budget_window, store, clock)
