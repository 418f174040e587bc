"""The audit record's bounds: what an action, a span attribute or a log line may hold.

Everything the gateway records passes through here: a policy's actions
(`PolicyAction`, so `PolicyContext.record` too), the fallback's and a repair's
record, span attributes, and every log line (the log formatter). A client or
a model therefore cannot make a record large, nor put content into it by
choosing a long name:

- a string they chose (a tool or MCP server name, a model, a key) keeps its
  first MAX_TEXT characters; a longer one is cut there and ends in CUT;
- a detail is structure only: strings, numbers, booleans, null, and lists and
  maps of them, at most MAX_ITEMS entries each (the rest counted) and
  MAX_DEPTH levels deep; anything else is recorded by its type's name;
- a log line is one JSON object of fewer than MAX_LINE_BYTES bytes of UTF-8,
  whatever it was given (`line`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

MAX_TEXT = 64
"""Characters kept of a string the client or the model chose."""
CUT = "…[cut]"
"""What ends a string that was cut at MAX_TEXT characters."""
MAX_ITEMS = 50
"""Entries kept of a list or a map in a recorded detail; the rest are counted."""
MAX_DEPTH = 6
"""Levels of lists and maps kept in a recorded detail."""
MAX_LINE_BYTES = 256 * 1024
"""A log line (and so a call line) is shorter than this: CloudWatch Logs' event size."""
MAX_MESSAGE = 1024
"""Characters kept of a log line's message once the line had to be cut."""
LINE_CUT = "line_cut"
"""The field a cut log line carries: the size in bytes of the line it replaced."""

_INT_BOUND = 2**63
_LINE_KEYS = ("level", "location", "message", "timestamp", "service", "call_id", "caller")
"""What a line keeps when even its bounded fields do not fit."""


def text(value: str, limit: int = MAX_TEXT) -> str:
    """`value`, or its first `limit` characters followed by CUT."""
    return value if len(value) <= limit else value[:limit] + CUT


def detail(value: Any, depth: int = 0) -> Any:
    """`value` as the record keeps it: structure only, every string and collection bounded."""
    if value is None or isinstance(value, bool | str):
        return text(value) if isinstance(value, str) else value
    if isinstance(value, int):
        return value if -_INT_BOUND <= value < _INT_BOUND else "<int>"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= MAX_DEPTH:
        return f"<{type(value).__name__}>"
    if isinstance(value, Mapping):
        return details(value, depth + 1)
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value) if not isinstance(value, list) else value
        kept = [detail(item, depth + 1) for item in items[:MAX_ITEMS]]
        if len(items) > MAX_ITEMS:
            kept.append(f"<{len(items) - MAX_ITEMS} more>")
        return kept
    return f"<{type(value).__name__}>"


def details(values: Mapping[Any, Any], depth: int = 0) -> dict[str, Any]:
    """A map as the record keeps it: keys as bounded text, values as `detail`."""
    kept: dict[str, Any] = {}
    for count, (key, value) in enumerate(values.items()):
        if count == MAX_ITEMS:
            kept["<more keys>"] = len(values) - MAX_ITEMS
            break
        kept[text(key if isinstance(key, str) else str(detail(key)))] = detail(value, depth)
    return kept


def line(record: Mapping[str, Any]) -> str:
    """A log record as one line of JSON shorter than MAX_LINE_BYTES (the log formatter's).

    A record that fits is written as given; one that does not has each field
    bounded as a detail (its message to MAX_MESSAGE characters); one that
    still does not fit keeps only the line's identity. Either way the line
    carries LINE_CUT, the size of what it replaced.
    """
    try:
        serialized, size = _dumps(record)
    except (TypeError, ValueError, RecursionError):
        serialized, size = "", MAX_LINE_BYTES
    if size < MAX_LINE_BYTES:
        return serialized
    bounded = {key: detail(value) for key, value in record.items()}
    if isinstance(record.get("message"), str):
        bounded["message"] = text(record["message"], MAX_MESSAGE)
    bounded[LINE_CUT] = size
    serialized, cut_size = _dumps(bounded)
    if cut_size < MAX_LINE_BYTES:
        return serialized
    kept = {key: bounded[key] for key in _LINE_KEYS if key in bounded}
    return _dumps({**kept, LINE_CUT: size})[0]


def _dumps(record: Mapping[str, Any]) -> tuple[str, int]:
    """The JSON text and its size in bytes; escaped to ASCII when it is not valid UTF-8
    (a lone surrogate from a client's `\\ud800` would make the write itself fail)."""
    serialized = json.dumps(record, default=str, separators=(",", ":"), ensure_ascii=False)
    if serialized.isascii():
        return serialized, len(serialized)
    try:
        return serialized, len(serialized.encode())
    except UnicodeEncodeError:
        serialized = json.dumps(record, default=str, separators=(",", ":"))
        return serialized, len(serialized)
