"""What a process printed, line by line: the JSON objects among its lines (logs, EMF)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def json_objects(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each line of a process's output that is a JSON object, as printed and parsed."""
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield line, value
