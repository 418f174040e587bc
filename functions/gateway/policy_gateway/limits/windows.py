"""The windows a caller's counts live in: a minute, a day, a month, in UTC.

Each window is named by its start (`minute:<epoch minute>`, `day:2026-12-06`,
`month:2026-12`), computed from the environment's own clock. A count is added
to exactly the window its environment named, so two environments whose clocks
disagree by a few seconds at a boundary may put the same second's calls in two
neighbouring windows, but never count one call in both: skew can move a call
across a boundary, never double it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

MINUTE = "minute"
DAY = "day"
MONTH = "month"
KINDS = (MINUTE, DAY, MONTH)
# An item outlives its window by this long (the table's TTL), so a late report from
# an environment whose clock runs behind still lands on an item that exists.
GRACE_SECONDS = 3600


@dataclass(frozen=True)
class Window:
    kind: str
    name: str
    start: float
    end: float

    @property
    def expires(self) -> int:
        return int(self.end) + GRACE_SECONDS

    def seconds_left(self, now: float) -> int:
        """Whole seconds until the window's end (a `retry-after`), at least 1."""
        return max(1, math.ceil(self.end - now))

    def reset_iso(self) -> str:
        return datetime.fromtimestamp(self.end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def window(kind: str, now: float) -> Window:
    if kind == MINUTE:
        start = math.floor(now / 60) * 60
        return Window(MINUTE, f"{MINUTE}:{start // 60}", start, start + 60)
    moment = datetime.fromtimestamp(now, UTC)
    if kind == DAY:
        day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        return Window(DAY, f"{DAY}:{day:%Y-%m-%d}", day.timestamp(), day.timestamp() + 86400)
    month = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        month.replace(year=month.year + 1, month=1)
        if month.month == 12
        else month.replace(month=month.month + 1)
    )
    return Window(MONTH, f"{MONTH}:{month:%Y-%m}", month.timestamp(), following.timestamp())
