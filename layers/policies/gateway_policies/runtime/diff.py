"""Which JSON paths differ between two documents.

The fallback's log and trace name the paths a policy changed, never their
content, so an operator can see which policy broke a request without the
request's text reaching a log.

The walk is iterative (a body nested 950 levels deep is valid JSON), and it
descends only into values that differ, found by C-speed equality first, so a
multi-megabyte request with one changed field costs little.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Location = tuple[str | int, ...]
"""A path as keys and list indices from the root: ("messages", 0, "content")."""

MISSING = object()
"""What `resolve` gives for a location the document does not have."""


def _equal(left: Any, right: Any) -> bool:
    try:
        return bool(type(left) is type(right) and left == right)
    except RecursionError:
        return False


def changed_locations(before: Any, after: Any, limit: int | None = None) -> list[Location]:
    """Locations whose values differ, at most `limit` of them, dict keys in sorted order.

    A location is reported, not descended into, when its key was added or
    removed, its type changed, or (for a list) its length changed.
    """
    found: list[Location] = []
    pending: list[tuple[Location, Any, Any]] = [((), before, after)]
    while pending and (limit is None or len(found) < limit):
        location, left, right = pending.pop()
        if _equal(left, right):
            continue
        if isinstance(left, dict) and isinstance(right, dict):
            for key in sorted(left.keys() | right.keys(), key=str, reverse=True):
                pending.append(((*location, key), left.get(key, MISSING), right.get(key, MISSING)))
        elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
            for index in reversed(range(len(left))):
                pending.append(((*location, index), left[index], right[index]))
        else:
            found.append(location)
    return found


def format_path(location: Location) -> str:
    """JSONPath-like text for a location: `$.messages[0].content`."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location)


def resolve(document: Any, location: Location) -> Any:
    """The value at `location`, or a marker that equals nothing else when it is not there."""
    value = document
    for part in location:
        held = (isinstance(value, dict) and part in value) or (
            isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)
        )
        if not held:
            return MISSING
        value = value[part]
    return value


def resolve_each(document: Any, locations: Sequence[Location]) -> list[Any]:
    """`resolve` of every location, each shared stem walked once: the locations of 200,000
    blocks of one list cost one walk to the list and two steps each."""
    found: list[Any] = []
    stem: Location | None = None
    base: Any = None
    for location in locations:
        split = max(len(location) - 2, 0)
        if location[:split] != stem:
            stem = location[:split]
            base = resolve(document, stem)
        value = base
        for part in location[split:]:
            if isinstance(value, dict):
                value = value.get(part, MISSING)
            elif isinstance(value, list) and type(part) is int and 0 <= part < len(value):
                value = value[part]
            else:
                value = MISSING
                break
        found.append(value)
    return found
