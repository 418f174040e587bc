"""Where a caller's counts are shared: one DynamoDB item per caller and window, or this process.

An environment reports what it counted and asks for room in one conditional
`UpdateItem` (`add`): the counts are added only if each limited one stays within
its ceiling, and the item's totals come back either way. The table is the
fallback budget's schema (a string key `bucket`, TTL on `expires_at`), so
LIMITS_TABLE may name the stack's fallback-budget table: limits items are keyed
`limits#<caller>#<window>` and carry `period` rather than the budget's
`window_start`, so neither reader ever sees the other's items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import anyio.to_thread

from ..fallback.budget_table import (
    CALLER_ATTRIBUTE,
    KEY_ATTRIBUTE,
    TTL_ATTRIBUTE,
    WAIT_SECONDS,
    Table,
    dynamodb_client,
)
from .windows import Window

KEY_PREFIX = "limits#"
PERIOD_ATTRIBUTE = "period"


class LimitsUnavailable(Exception):
    """The shared counts could not be read or written; never carries AWS's message."""


def item_key(caller: str, window_name: str) -> str:
    return f"{KEY_PREFIX}{caller}#{window_name}"


class CountStore(Protocol):
    label: str
    """What the load line says the counts are kept in."""

    async def add(
        self,
        caller: str,
        window: Window,
        adds: Mapping[str, int],
        ceilings: Mapping[str, int],
    ) -> tuple[bool, dict[str, int]]:
        """Add `adds` to the window's counts if each counter in `ceilings` then stays within
        its ceiling: (True, the new totals); else nothing is added: (False, the totals).

        Raises LimitsUnavailable when the counts cannot be reached.
        """
        ...


class InProcessStore:
    """Counts in this process only: each environment limits its callers on its own."""

    label = "process"

    def __init__(self) -> None:
        self._items: dict[str, tuple[float, dict[str, int]]] = {}

    async def add(
        self,
        caller: str,
        window: Window,
        adds: Mapping[str, int],
        ceilings: Mapping[str, int],
    ) -> tuple[bool, dict[str, int]]:
        if any(end <= window.start - 86400 * 31 for end, _ in self._items.values()):
            # Windows long over only grow the map.
            self._items = {
                key: item
                for key, item in self._items.items()
                if item[0] > window.start - 86400 * 31
            }
        _, totals = self._items.setdefault(item_key(caller, window.name), (window.end, {}))
        if any(
            totals.get(name, 0) + adds.get(name, 0) > ceiling for name, ceiling in ceilings.items()
        ):
            return False, dict(totals)
        for name, value in adds.items():
            totals[name] = totals.get(name, 0) + value
        return True, dict(totals)


class DynamoDBStore(Table):
    """Counts in a DynamoDB table, shared by every environment that names it."""

    def __init__(self, table: str, client: Callable[[], Any] = dynamodb_client) -> None:
        super().__init__(table, client)
        self.label = f"dynamodb:{table}"

    async def add(
        self,
        caller: str,
        window: Window,
        adds: Mapping[str, int],
        ceilings: Mapping[str, int],
    ) -> tuple[bool, dict[str, int]]:
        await anyio.to_thread.run_sync(lambda: self._client)
        with anyio.move_on_after(WAIT_SECONDS):
            return await anyio.to_thread.run_sync(
                self._update, caller, window, adds, ceilings, abandon_on_cancel=True
            )
        raise LimitsUnavailable("Timeout")

    def _update(
        self,
        caller: str,
        window: Window,
        adds: Mapping[str, int],
        ceilings: Mapping[str, int],
    ) -> tuple[bool, dict[str, int]]:
        from botocore.exceptions import BotoCoreError, ClientError

        names = {
            "#caller": CALLER_ATTRIBUTE,
            "#period": PERIOD_ATTRIBUTE,
            "#expires": TTL_ATTRIBUTE,
        }
        values: dict[str, Any] = {
            ":caller": {"S": caller},
            ":period": {"S": window.name},
            ":expires": {"N": str(window.expires)},
        }
        added = []
        for index, (name, value) in enumerate(adds.items()):
            names[f"#a{index}"] = name
            values[f":a{index}"] = {"N": str(value)}
            added.append(f"#a{index} :a{index}")
        conditions = []
        for index, (name, ceiling) in enumerate(ceilings.items()):
            most = ceiling - adds.get(name, 0)
            names[f"#c{index}"] = name
            values[f":c{index}"] = {"N": str(most)}
            # More than the whole limit never fits, even in a window with no count yet.
            unset = f"attribute_not_exists(#c{index}) OR " if most >= 0 else ""
            conditions.append(f"({unset}#c{index} <= :c{index})")
        request: dict[str, Any] = {
            "TableName": self.table,
            "Key": {KEY_ATTRIBUTE: {"S": item_key(caller, window.name)}},
            "UpdateExpression": "SET #caller = :caller, #period = :period, #expires = :expires"
            + (" ADD " + ", ".join(added) if added else ""),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValues": "ALL_NEW",
        }
        if conditions:
            request["ConditionExpression"] = " AND ".join(conditions)
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            answer = self._client.update_item(**request)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code != "ConditionalCheckFailedException":
                raise LimitsUnavailable(code or "ClientError") from None
            # ALL_OLD: the item as it stood (none when the window has no item yet).
            old = cast("dict[str, Any]", exc.response.get("Item", {}))
            return False, counts(old)
        except BotoCoreError as exc:
            raise LimitsUnavailable(type(exc).__name__) from None
        return True, counts(answer.get("Attributes", {}))


def counts(item: Mapping[str, Any]) -> dict[str, int]:
    """An item's counters (its number attributes other than the TTL)."""
    return {
        name: int(value["N"])
        for name, value in item.items()
        if "N" in value and name != TTL_ATTRIBUTE
    }
