"""One environment's share of its callers' windows: leases taken from the store, spent here.

A counter of a window (requests this minute, spend today, ...) is limited or not.
For a limited one, the environment may count up to its *allowance* past the total
the store last told it, without asking: the allowance is min(lease, what was
left), and the lease is the limit / LEASE_DIVISOR, rounded down. Past it, one
`CountStore.add` reports what was counted here and adds the call only if the
shared total stays within the limit. So each environment can count at most one
lease that the others have not seen yet, and the shared total can pass a limit
by at most (environments x lease) = environments x limit / 1250: 8% at 100
environments. A limit below 1,250 has a lease of 0: every call asks, and the
limit is never passed at all. A caller far below its limits costs one write per
lease, not per call.

A counter with no limit (spend, tokens and requests kept for `policy-gateway
usage`) is reported once it has counted REPORT_LEASE here.

Once a limited counter is refused, its window stays refused here without asking
again (the daily budget's "no DynamoDB read per refused call") until the window
ends, the limit changes, or a reconciliation here gives room back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import config
from .store import CountStore, LimitsUnavailable
from .windows import DAY, MINUTE, MONTH, Window

LEASE_DIVISOR = 1250
MICRO_USD = 1_000_000

# The counters of each window, by attribute name in the store.
REQUESTS = "requests"
INPUT_TOKENS = "input_tokens"
OUTPUT_TOKENS = "output_tokens"
TOKENS = "tokens"
SPEND = "spend_microusd"
COUNTERS = {
    MINUTE: (REQUESTS, INPUT_TOKENS, OUTPUT_TOKENS),
    DAY: (REQUESTS, TOKENS, SPEND),
    MONTH: (REQUESTS, TOKENS, SPEND),
}
# Which limit governs which counter of which window.
GOVERNED = {
    config.REQUESTS_PER_MINUTE: (MINUTE, REQUESTS),
    config.INPUT_TOKENS_PER_MINUTE: (MINUTE, INPUT_TOKENS),
    config.OUTPUT_TOKENS_PER_MINUTE: (MINUTE, OUTPUT_TOKENS),
    config.TOKENS_PER_DAY: (DAY, TOKENS),
    config.SPEND_PER_DAY_USD: (DAY, SPEND),
    config.SPEND_PER_MONTH_USD: (MONTH, SPEND),
}
REPORT_LEASE = {
    REQUESTS: 1000,
    INPUT_TOKENS: 10_000_000,
    OUTPUT_TOKENS: 10_000_000,
    TOKENS: 10_000_000,
    SPEND: 10 * MICRO_USD,
}


def ceiling(name: str, value: float) -> int:
    """A limit in the store's units: counts as they are, dollars in micro-dollars."""
    return round(value * MICRO_USD) if name in config.SPEND_LIMITS else int(value)


def lease(limit: int) -> int:
    return limit // LEASE_DIVISOR


@dataclass
class Slot:
    """One caller's window as this environment sees it."""

    window: Window
    seen: dict[str, int] = field(default_factory=dict)
    """The store's totals when this environment last asked."""
    pending: dict[str, int] = field(default_factory=dict)
    """Counted here since, not yet in the store (negative after a refund)."""
    allowance: dict[str, int] = field(default_factory=dict)
    """How far past `seen` this environment may count without asking."""
    refused: dict[str, int] = field(default_factory=dict)
    """For a counter the store refused: the smallest need refused (a need as large is
    refused here without asking)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def used(self, counter: str) -> int:
        return self.seen.get(counter, 0) + self.pending.get(counter, 0)

    def fits(self, needs: Mapping[str, int], ceilings: Mapping[str, int]) -> bool:
        """Whether `needs` fit this environment's allowances, with no need to ask."""
        for counter, need in needs.items():
            room = self.allowance.get(counter, 0) if counter in ceilings else REPORT_LEASE[counter]
            if self.pending.get(counter, 0) + need > room:
                return False
        return True

    def refused_here(self, needs: Mapping[str, int], ceilings: Mapping[str, int]) -> str | None:
        """A limited counter this environment already knows cannot take `needs`."""
        for counter, limit in ceilings.items():
            need = needs.get(counter, 0)
            if self.used(counter) + need > limit and (
                self.used(counter) >= limit or need >= self.refused.get(counter, need + 1)
            ):
                return counter
        return None

    def count(self, amounts: Mapping[str, int]) -> None:
        for counter, amount in amounts.items():
            if amount:
                self.pending[counter] = self.pending.get(counter, 0) + amount
                if amount < 0:
                    # Room given back: a refusal may no longer hold.
                    self.refused.pop(counter, None)

    def learned(
        self, totals: Mapping[str, int], sent: Mapping[str, int], ceilings: Mapping[str, int]
    ) -> None:
        """The store's totals after it took `sent` (what was pending when it was asked)."""
        self.seen = dict(totals)
        for counter, amount in sent.items():
            self.pending[counter] = self.pending.get(counter, 0) - amount
        self.allowance = {
            counter: max(0, min(lease(limit), limit - self.used(counter)))
            for counter, limit in ceilings.items()
        }


class Ledger:
    """Every slot of this environment, and the store they ask."""

    def __init__(self, store: CountStore) -> None:
        self.store = store
        self._slots: dict[tuple[str, str], Slot] = {}
        self._ended: list[tuple[str, Slot]] = []
        """Slots of windows that ended here, until what they counted is reported."""

    def slot(self, caller: str, window: Window) -> Slot:
        key = (caller, window.kind)
        slot = self._slots.get(key)
        if slot is None or slot.window.name != window.name:
            if slot is not None:
                # A call admitted in it may still reconcile: reported later (`report_ended`).
                self._ended.append((caller, slot))
            slot = self._slots[key] = Slot(window)
        return slot

    @property
    def has_ended(self) -> bool:
        return bool(self._ended)

    async def report_ended(self) -> None:
        """Report what the slots of ended windows counted, once per window's end."""
        ended, self._ended = self._ended, []
        await self._report(ended)

    async def ask(
        self, caller: str, slot: Slot, needs: Mapping[str, int], ceilings: Mapping[str, int]
    ) -> str | None:
        """Report what `slot` counted and add `needs` if the store has room: None when it
        did (the needs are counted), else the first limited counter that had none."""
        sent = {counter: value for counter, value in slot.pending.items() if value}
        adds = dict(sent)
        for counter, need in needs.items():
            adds[counter] = adds.get(counter, 0) + need
        limited = {counter: limit for counter, limit in ceilings.items() if counter in adds}
        ok, totals = await self.store.add(caller, slot.window, adds, limited)
        if ok:
            slot.learned(totals, sent, ceilings)
            return None
        full = next(
            counter
            for counter, limit in limited.items()
            if totals.get(counter, 0) + adds[counter] > limit
        )
        if sent:
            # What was counted here still goes in, refusal or not; if it cannot, it stays
            # pending here (the refusal stands either way).
            try:
                _, totals = await self.store.add(caller, slot.window, sent, {})
            except LimitsUnavailable:
                sent = {}
        slot.learned(totals, sent, ceilings)
        slot.allowance = {}
        previous = slot.refused.get(full)
        slot.refused[full] = (
            needs.get(full, 0) if previous is None else min(previous, needs.get(full, 0))
        )
        return full

    async def flush(self) -> None:
        """Report every count not yet in the store (at shutdown; errors are the next
        environment's loss, bounded by one lease each)."""
        ended, self._ended = self._ended, []
        await self._report([*ended, *((key[0], slot) for key, slot in self._slots.items())])

    async def _report(self, slots: list[tuple[str, Slot]]) -> None:
        for index, (caller, slot) in enumerate(slots):
            sent = {counter: value for counter, value in slot.pending.items() if value}
            if not sent:
                continue
            try:
                _, totals = await self.store.add(caller, slot.window, sent, {})
            except LimitsUnavailable:
                # Kept for the next report, whichever slots are still to go.
                self._ended += [item for item in slots[index:] if item[1] is not self._live(item)]
                raise
            slot.seen = totals
            for counter, amount in sent.items():
                slot.pending[counter] -= amount

    def _live(self, item: tuple[str, Slot]) -> Slot | None:
        return self._slots.get((item[0], item[1].window.kind))
