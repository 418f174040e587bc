"""What `policy-gateway usage` reads from LIMITS_TABLE: spend and tokens per caller, and one
caller's remaining capacity under each of its limits.

The operator's side only: a Scan of the period's items for the top spenders
(the table holds one item per caller per window and expires them an hour after
their window, so it stays as small as the set of recent callers), one
consistent GetItem per window for a caller. The counts are the ones the
gateway's refusals and headers use (ledger.py), less what environments have
counted and not yet reported: at most one lease each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..fallback.budget_table import CALLER_ATTRIBUTE, KEY_ATTRIBUTE
from .config import SPEND_LIMITS, Limits
from .ledger import GOVERNED, MICRO_USD, REQUESTS, SPEND, TOKENS
from .store import PERIOD_ATTRIBUTE, counts, item_key
from .windows import window


@dataclass(frozen=True)
class CallerSpend:
    caller: str
    spend_usd: float
    tokens: int
    requests: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "caller": self.caller,
            "spend_usd": self.spend_usd,
            "tokens": self.tokens,
            "requests": self.requests,
        }


def top_spenders(client: Any, table: str, kind: str, now: float, count: int) -> list[CallerSpend]:
    """The `count` callers that spent most in the current day or month, most first."""
    period = window(kind, now).name
    pages = client.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="#period = :period",
        ExpressionAttributeNames={"#period": PERIOD_ATTRIBUTE},
        ExpressionAttributeValues={":period": {"S": period}},
        ConsistentRead=True,
    )
    spenders = []
    for page in pages:
        for item in page.get("Items", []):
            found = counts(item)
            spenders.append(
                CallerSpend(
                    item[CALLER_ATTRIBUTE]["S"],
                    found.get(SPEND, 0) / MICRO_USD,
                    found.get(TOKENS, 0),
                    found.get(REQUESTS, 0),
                )
            )
    spenders.sort(key=lambda spender: (-spender.spend_usd, spender.caller))
    return spenders[:count]


def capacity(client: Any, table: str, caller: str, limits: Limits, now: float) -> dict[str, Any]:
    """Each of the caller's limits: its value, what was used, what is left, when it resets."""
    items: dict[str, dict[str, int]] = {}
    report: dict[str, Any] = {}
    for name, value in limits.values.items():
        kind, counter = GOVERNED[name]
        current = window(kind, now)
        if kind not in items:
            item = client.get_item(
                TableName=table,
                Key={KEY_ATTRIBUTE: {"S": item_key(caller, current.name)}},
                ConsistentRead=True,
            ).get("Item", {})
            items[kind] = counts(item)
        used: float = items[kind].get(counter, 0)
        if name in SPEND_LIMITS:
            used /= MICRO_USD
        report[name] = {
            "limit": value,
            "used": used,
            "remaining": max(0, value - used),
            "resets": current.reset_iso(),
        }
    return report
