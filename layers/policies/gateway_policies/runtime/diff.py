"""Which JSON paths differ between two documents.

The fallback's log and trace name the paths a policy changed, never their
content, so an operator can see which policy broke a request without the
request's text reaching a log. A path names the request's structure only: it
quotes the Messages API's field names (api_shape.py) and list indices, and
stops at the first key the client chose, which it counts instead
(`$.tool_choice.<2 other keys>`, `$.metadata.<1 key>`); it is at most
MAX_PATH characters long.

The walk is iterative (a body nested 950 levels deep is valid JSON), and it
descends only into values that differ, found by C-speed equality first, so a
multi-megabyte request with one changed field costs little.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .. import recorder
from .api_shape import FREE_FORM_MAPS, KNOWN_KEYS

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


MAX_PATH = 200
"""Characters kept of a path (known fields can nest deep); a longer one is cut, and marked."""


def format_path(location: Location) -> str:
    """JSONPath-like text for a location: `$.messages[0].content`, structure only.

    A key the API does not define, or any key in a map of the client's own
    keys, ends the path as `<1 other key>` or `<1 key>`.
    """
    path, placeholder, _ = _structure(location)
    return _counted(path, placeholder, 1)


def format_paths(locations: Iterable[Location]) -> list[str]:
    """`format_path` of each location, in order, those that name the same structure
    folded into one that counts the keys: `$.tool_choice.<2 other keys>`."""
    keys: dict[tuple[str, str], set[Location]] = {}
    for location in locations:
        path, placeholder, prefix = _structure(location)
        keys.setdefault((path, placeholder), set()).add(prefix)
    return [_counted(path, placeholder, len(held)) for (path, placeholder), held in keys.items()]


def _structure(location: Location) -> tuple[str, str, Location]:
    """The path's quotable part, what ends it ("" when nothing does), and the location
    up to the key that ended it."""
    parts = ["$"]
    free = False
    for depth, part in enumerate(location):
        if isinstance(part, int):
            parts.append(f"[{part}]")
            continue
        if free or part not in KNOWN_KEYS:
            return "".join(parts), "key" if free else "other key", location[: depth + 1]
        parts.append(f".{part}")
        free = part in FREE_FORM_MAPS
    return "".join(parts), "", location


def _counted(path: str, placeholder: str, count: int) -> str:
    if placeholder:
        path += f".<{count} {placeholder}{'' if count == 1 else 's'}>"
    return recorder.text(path, MAX_PATH)


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
