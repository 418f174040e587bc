"""The fallback budget's DynamoDB table: its schema, the store that counts in it, the read.

template.yaml declares the same table (tests/test_template.py holds them to
one another). The gateway only ever writes (one conditional UpdateItem per
fallback); reading it, one caller or the top callers, is the operator's
(`policy-gateway budget`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import anyio.to_thread

# The table's schema; template.yaml declares the same (tests/test_template.py).
KEY_ATTRIBUTE = "bucket"
TTL_ATTRIBUTE = "expires_at"
COUNT_ATTRIBUTE = "used"
CALLER_ATTRIBUTE = "caller"
WINDOW_ATTRIBUTE = "window_start"

# A table that answers slower than this counts as unavailable: the call gets
# the upstream's error now instead of waiting out boto's timeouts and retries.
WAIT_SECONDS = 1.0


def window_start(now: float, window: int) -> int:
    return int(now // window) * window


def bucket(caller: str, start: int) -> str:
    return f"{caller}#{start}"


class BudgetUnavailable(Exception):
    """The shared counter could not be read or written; never carries AWS's message."""


def dynamodb_client() -> Any:
    """A DynamoDB client with the gateway's short AWS timeouts.

    Like every AWS client here it honours AWS_ENDPOINT_URL_DYNAMODB.
    """
    from ..aws_reads import aws_client

    return aws_client("dynamodb")


class Table:
    """A DynamoDB table and a client made on first use: boto3 loads only when the first call
    that needs the table comes, never on the cold path. Shared by the fallback budget's
    counters and the limits' (limits/store.py), which may count in one table."""

    def __init__(self, table: str, client: Callable[[], Any] = dynamodb_client) -> None:
        self.table = table
        self._make_client = client

    @cached_property
    def _client(self) -> Any:
        return self._make_client()

    def close(self) -> None:
        """Close the client's connections, if it was ever made (before a snapshot)."""
        client = self.__dict__.pop("_client", None)
        if client is not None:
            client.close()


class DynamoDBStore(Table):
    """Counters in a DynamoDB table, shared by every instance that names it."""

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


def top_callers(
    client: Any, table: str, limit: int, window: int, now: float, count: int
) -> list[Usage]:
    """The `count` callers with the most fallbacks in the current window, most first.

    A scan: the table holds one item per caller per window and expires the old
    ones, so it stays as small as the set of callers that fell back lately.
    """
    start = window_start(now, window)
    pages = client.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="#start = :start",
        ExpressionAttributeNames={"#start": WINDOW_ATTRIBUTE},
        ExpressionAttributeValues={":start": {"N": str(start)}},
        ConsistentRead=True,
    )
    usages = [
        Usage(item[CALLER_ATTRIBUTE]["S"], int(item[COUNT_ATTRIBUTE]["N"]), limit, start, window)
        for page in pages
        for item in page.get("Items", [])
    ]
    usages.sort(key=lambda usage: (-usage.used, usage.caller))
    return usages[:count]


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
