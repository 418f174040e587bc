"""The fallback budget: at most FALLBACK_BUDGET fallbacks per caller per window.

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

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Protocol

import anyio.to_thread

from . import metrics, settings
from .logs import logger

REASON_BUDGET = "budget"
REASON_UNAVAILABLE = "budget_unavailable"

# The table's schema; template.yaml declares the same (tests/test_template.py).
KEY_ATTRIBUTE = "bucket"
TTL_ATTRIBUTE = "expires_at"
COUNT_ATTRIBUTE = "used"
CALLER_ATTRIBUTE = "caller"
WINDOW_ATTRIBUTE = "window_start"

ANONYMOUS = "anonymous"

# A table that answers slower than this counts as unavailable: the call gets
# the upstream's error now instead of waiting out boto's timeouts and retries.
WAIT_SECONDS = 1.0


def window_start(now: float, window: int) -> int:
    return int(now // window) * window


def bucket(caller: str, start: int) -> str:
    return f"{caller}#{start}"


class BudgetUnavailable(Exception):
    """The shared counter could not be read or written; never carries AWS's message."""


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


def dynamodb_client() -> Any:
    """A DynamoDB client with the gateway's short AWS timeouts.

    Like every AWS client here it honours AWS_ENDPOINT_URL_DYNAMODB.
    """
    import boto3

    from .parameters import aws_config

    # botocore reads AWS_DEFAULT_REGION only; Lambda and most shells set AWS_REGION.
    return boto3.client(
        "dynamodb", region_name=os.environ.get("AWS_REGION") or None, config=aws_config()
    )


class DynamoDBStore:
    """Counters in a DynamoDB table, shared by every instance that names it."""

    def __init__(self, table: str, client: Callable[[], Any] = dynamodb_client) -> None:
        self.table = table
        self._make_client = client

    @cached_property
    def _client(self) -> Any:
        # boto3 loads only when the first fallback needs it, never on the cold path.
        return self._make_client()

    def _update(self, caller: str, start: int, limit: int, expires: int) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.update_item(
                TableName=self.table,
                Key={KEY_ATTRIBUTE: {"S": bucket(caller, start)}},
                UpdateExpression="ADD #used :one SET #caller = :caller, #start = :start, "
                "#expires = :expires",
                ConditionExpression="attribute_not_exists(#used) OR #used < :limit",
                ExpressionAttributeNames={
                    "#used": COUNT_ATTRIBUTE,
                    "#caller": CALLER_ATTRIBUTE,
                    "#start": WINDOW_ATTRIBUTE,
                    "#expires": TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":limit": {"N": str(limit)},
                    ":caller": {"S": caller},
                    ":start": {"N": str(start)},
                    ":expires": {"N": str(expires)},
                },
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ConditionalCheckFailedException":
                return False
            raise BudgetUnavailable(code or "ClientError") from None
        except BotoCoreError as exc:
            raise BudgetUnavailable(type(exc).__name__) from None
        return True

    async def spend(self, caller: str, start: int, limit: int, expires: int) -> bool:
        # Building the client (importing boto3) is local work, not the table's
        # answer: it stays outside the bound.
        await anyio.to_thread.run_sync(lambda: self._client)
        with anyio.move_on_after(WAIT_SECONDS):
            # Abandoned on timeout: the thread ends within boto's own timeouts,
            # and a count it still makes only errs on the side of refusing.
            return await anyio.to_thread.run_sync(
                self._update, caller, start, limit, expires, abandon_on_cancel=True
            )
        raise BudgetUnavailable("Timeout")


@dataclass(frozen=True)
class Usage:
    """A caller's use of the current window, as the CLI prints it."""

    caller: str
    used: int
    limit: int
    window_start: int
    window_seconds: int

    def as_dict(self) -> dict[str, Any]:
        def iso(epoch: int) -> str:
            return datetime.fromtimestamp(epoch, UTC).isoformat()

        return {
            "caller": self.caller,
            "used": self.used,
            "limit": self.limit,
            "remaining": max(0, self.limit - self.used),
            "window_start": iso(self.window_start),
            "window_end": iso(self.window_start + self.window_seconds),
        }


def read_usage(client: Any, table: str, caller: str, limit: int, window: int, now: float) -> Usage:
    """The current window's count for `caller`, read with one consistent GetItem."""
    start = window_start(now, window)
    item = client.get_item(
        TableName=table, Key={KEY_ATTRIBUTE: {"S": bucket(caller, start)}}, ConsistentRead=True
    ).get("Item", {})
    used = int(item.get(COUNT_ATTRIBUTE, {}).get("N", "0"))
    return Usage(caller, used, limit, start, window)


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

    async def allows(self, caller: str | None) -> bool:
        """Spend one fallback of `caller`'s budget; False (and loud) when none is left."""
        caller = caller or ANONYMOUS
        reason = await self._spend(caller)
        if reason is None:
            return True
        metrics.count(settings.METRIC_FALLBACK_DENIED)
        logger.warning(
            "passthrough fallback denied: "
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


def create_table(client: Any, table: str) -> None:
    """Create the budget table as template.yaml declares it (for local stand-ins and tests)."""
    client.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": KEY_ATTRIBUTE, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": KEY_ATTRIBUTE, "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(
        TableName=table,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )
