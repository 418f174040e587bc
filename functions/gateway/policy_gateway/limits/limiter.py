"""Each call's way through the limits: admitted before anything goes upstream, reconciled after.

`admit` counts a Messages call at its estimate (estimate.py): one request, its
input tokens, `max_tokens` of output, their spend at the model's price. A
count_tokens call and a batch's creation are one request each, with no tokens.
What the answer's `usage` then reports replaces the estimate (`settle`), a cut
stream's included (what it had reported when it was cut); a batch's tokens and
spend are counted when its results are fetched through the gateway, at the
batch price. So what the headers say is left, what a refusal is computed from
and what `policy-gateway usage` reads are one set of counts (ledger.py).

A refused call raises a 429 before anything is sent upstream. When the counts
cannot be reached, `limits_on_error` decides: `allow` counts the call here
(reported once the store answers again), `refuse` answers 503; either way
LimitsUnavailable is counted, once per call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from .. import names, settings
from ..call import Call
from ..errors import GatewayError
from ..observability import metrics
from ..observability.logs import logger
from . import config, headers
from .admission import CallLimits
from .config import LimitsConfig
from .estimate import estimate
from .ledger import (
    COUNTERS,
    GOVERNED,
    INPUT_TOKENS,
    MICRO_USD,
    OUTPUT_TOKENS,
    REQUESTS,
    SPEND,
    TOKENS,
    Ledger,
    Slot,
)
from .store import CountStore, DynamoDBStore, InProcessStore, LimitsUnavailable
from .windows import KINDS, window

ANONYMOUS = "anonymous"
MESSAGES = "messages"
BATCH_RESULTS = "batch_results"
UNAVAILABLE_MESSAGE = (
    "The gateway cannot reach its limits' counts right now and is configured to refuse "
    "calls meanwhile (limits_on_error: refuse). Try again shortly."
)


class Limiter:
    """Admits and reconciles every call of this environment against the shared counts."""

    def __init__(
        self, store: CountStore | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.ledger = Ledger(InProcessStore() if store is None else store)
        self._clock = clock

    @property
    def label(self) -> str:
        return self.ledger.store.label

    async def admit(
        self,
        call: Call,
        limits_config: LimitsConfig,
        request: Mapping[str, Any] | None = None,
        size: int = 0,
    ) -> None:
        """Count the call, or raise the 429 that refuses it (nothing then goes upstream).

        `request` is the Messages body as it goes upstream, `size` bytes long (None for
        a batch's creation and count_tokens, which count a request and no tokens).
        """
        if not limits_config:
            return
        caller = call.caller or ANONYMOUS
        state = CallLimits(caller, limits_config.resolve(caller, call.caller_groups), limits_config)
        state.now = now = self._clock()
        call.limits = state
        headers.stamp(call, state)
        needs = _needs(request, size, limits_config)
        if self.ledger.has_ended:
            await self._quietly(self.ledger.report_ended())
        for kind in KINDS:
            slot = self.ledger.slot(caller, window(kind, now))
            wanted = {counter: needs.get(counter, 0) for counter in COUNTERS[kind]}
            full = await self._take(state, slot, wanted)
            state.slots[kind] = slot
            if full is not None:
                self._refuse(state, kind, full)
            state.admitted[kind] = wanted

    async def _take(self, state: CallLimits, slot: Slot, wanted: dict[str, int]) -> str | None:
        ceilings = state.ceilings(slot.window.kind)
        full = slot.refused_here(wanted, ceilings)
        if full is not None:
            return full
        if slot.fits(wanted, ceilings):
            slot.count(wanted)
            return None
        async with slot.lock:
            if slot.fits(wanted, ceilings):
                slot.count(wanted)
                return None
            try:
                return await self.ledger.ask(state.caller, slot, wanted, ceilings)
            except LimitsUnavailable as exc:
                self._unavailable(state, exc)
                slot.count(wanted)
                return None

    def _unavailable(self, state: CallLimits, exc: LimitsUnavailable) -> None:
        metrics.count(names.METRIC_LIMITS_UNAVAILABLE)
        logger.warning(
            "limits unavailable",
            extra={
                "caller": state.caller,
                "error_type": str(exc),
                config.KEY_ON_ERROR: state.config.on_error,
            },
        )
        if state.config.on_error == config.ON_ERROR_REFUSE:
            self._roll_back(state)
            raise GatewayError(503, UNAVAILABLE_MESSAGE, "api_error")

    def _refuse(self, state: CallLimits, kind: str, counter: str) -> None:
        name = next(limit for limit, governed in GOVERNED.items() if governed == (kind, counter))
        self._roll_back(state)
        refused_in = state.slots[kind].window
        state.refused = (name, refused_in)
        metrics.count_by(names.METRIC_THROTTLED, {names.DIMENSION_LIMIT: name})
        raise GatewayError(
            429, headers.refusal_message(state, name, refused_in), "rate_limit_error"
        )

    @staticmethod
    def _roll_back(state: CallLimits) -> None:
        """Give back what the windows before the refusing one had counted."""
        for kind, counted in state.admitted.items():
            state.slots[kind].count({counter: -value for counter, value in counted.items()})
        state.admitted.clear()

    def settle(self, call: Call) -> None:
        """Replace the call's estimate with what its answer reported: local, no I/O."""
        state = call.limits
        if not isinstance(state, CallLimits) or state.refused is not None:
            return
        prices = state.config.prices
        actual = {INPUT_TOKENS: 0, OUTPUT_TOKENS: 0, TOKENS: 0, SPEND: 0}
        cost = 0.0
        for model, counts in call.usage.by_model.items():
            price, known = prices.price(model)
            state.priced = state.priced and known
            model_cost = price.cost(counts)
            if call.endpoint == BATCH_RESULTS:
                model_cost *= prices.batch_discount
            cost += model_cost
            actual[INPUT_TOKENS] += counts["input_tokens"] + counts["cache_creation_input_tokens"]
            actual[OUTPUT_TOKENS] += counts["output_tokens"]
            actual[TOKENS] += sum(counts.values())
        actual[SPEND] = round(cost * MICRO_USD)
        if call.usage.by_model or state.admitted:
            state.usage_usd = round(cost, 6)
        for kind, slot in state.slots.items():
            counted = state.admitted.get(kind, {})
            slot.count(
                {
                    counter: actual[counter] - counted.get(counter, 0)
                    for counter in COUNTERS[kind]
                    if counter != REQUESTS
                }
            )

    async def charge(self, call: Call, limits_config: LimitsConfig) -> None:
        """Open a batch's results for counting: no admission, its usage counted at `settle`."""
        if not limits_config:
            return
        caller = call.caller or ANONYMOUS
        state = CallLimits(caller, limits_config.resolve(caller, call.caller_groups), limits_config)
        state.now = self._clock()
        call.limits = state
        for kind in KINDS:
            state.slots[kind] = self.ledger.slot(caller, window(kind, state.now))

    async def flush(self) -> None:
        """Report what this environment counted and has not reported (at shutdown)."""
        await self._quietly(self.ledger.flush())

    def close(self) -> None:
        """Close the table client's connections, if it was ever made (before a snapshot)."""
        store = self.ledger.store
        if isinstance(store, DynamoDBStore):
            store.close()

    @staticmethod
    async def _quietly(reporting: Any) -> None:
        try:
            await reporting
        except LimitsUnavailable as exc:
            metrics.count(names.METRIC_LIMITS_UNAVAILABLE)
            logger.warning("limits unavailable", extra={"error_type": str(exc)})


def _needs(
    request: Mapping[str, Any] | None, size: int, limits_config: LimitsConfig
) -> dict[str, int]:
    if request is None:
        return {REQUESTS: 1}
    guess = estimate(size, request)
    price, _ = limits_config.prices.price(guess.model or "")
    spend = price.cost({"input_tokens": guess.input_tokens, "output_tokens": guess.output_tokens})
    return {
        REQUESTS: 1,
        INPUT_TOKENS: guess.input_tokens,
        OUTPUT_TOKENS: guess.output_tokens,
        TOKENS: guess.input_tokens + guess.output_tokens,
        SPEND: round(spend * MICRO_USD),
    }


def limiter(config: settings.Settings, clock: Callable[[], float] = time.time) -> Limiter:
    """The limiter LIMITS_TABLE asks for: shared counts in that table, else this process's."""
    table = config.limits_table
    return Limiter(DynamoDBStore(table) if table else InProcessStore(), clock)
