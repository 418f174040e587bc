"""The API's list pages for the simulator: `limit`, `before_id`, `after_id` and the page shape.

A list answers `{data, has_more, first_id, last_id}`, newest first; `after_id`
pages forward from an item, `before_id` back, and `has_more` says whether the
list goes on in the direction asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_LIMIT = 20
MAX_LIMIT = 1000


class PageRefused(ValueError):
    """A query the API refuses with a 400 `invalid_request_error`."""


def _limit(query: Mapping[str, str]) -> int:
    raw = query.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(raw)
    except ValueError:
        raise PageRefused(f"limit: Input should be a valid integer, got {raw!r}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise PageRefused(f"limit: Input should be between 1 and {MAX_LIMIT}")
    return limit


def _position(ids: list[str], query: Mapping[str, str], name: str) -> int:
    try:
        return ids.index(query[name])
    except ValueError:
        raise PageRefused(f"{name}: no object with id {query[name]!r} in this list") from None


def page(items: Sequence[dict[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
    """One page of `items` (newest first, each with an `id`) as `query` asks."""
    limit = _limit(query)
    if "before_id" in query and "after_id" in query:
        raise PageRefused("before_id and after_id cannot both be given")
    ids = [str(item["id"]) for item in items]
    if "before_id" in query:
        end = _position(ids, query, "before_id")
        start = max(0, end - limit)
        has_more = start > 0
    else:
        start = _position(ids, query, "after_id") + 1 if "after_id" in query else 0
        end = min(len(items), start + limit)
        has_more = end < len(items)
    data = list(items[start:end])
    return {
        "data": data,
        "has_more": has_more,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
