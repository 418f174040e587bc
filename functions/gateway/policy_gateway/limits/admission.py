"""What one call was admitted at under its caller's limits, and what it cost.

Kept on the call (`Call.limits`) from admission (limiter.py) to its log line,
read by the headers of its answer (headers.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import Limits, LimitsConfig
from .ledger import GOVERNED, Slot, ceiling
from .windows import Window

# The call line's field of what a call cost, which the template's spend insight rule sums.
USAGE_USD = "usage_usd"


@dataclass
class CallLimits:
    """One call's limits: what it was admitted at, in which windows, and what it cost."""

    caller: str
    limits: Limits
    config: LimitsConfig
    slots: dict[str, Slot] = field(default_factory=dict)
    admitted: dict[str, dict[str, int]] = field(default_factory=dict)
    """By window kind, what admission counted."""
    refused: tuple[str, Window] | None = None
    """The limit that refused the call and its window."""
    now: float = 0.0
    usage_usd: float | None = None
    priced: bool = True

    def ceilings(self, kind: str) -> dict[str, int]:
        return {
            counter: ceiling(name, value)
            for name, value in self.limits.values.items()
            for window_kind, counter in (GOVERNED[name],)
            if window_kind == kind
        }

    def fields(self) -> dict[str, Any]:
        """The call line's `usage_usd` (and `usage_priced` when a model was not in the table)."""
        if self.usage_usd is None:
            return {}
        line: dict[str, Any] = {USAGE_USD: self.usage_usd}
        if not self.priced:
            line["usage_priced"] = False
        return line
