"""A tool result that steers the simulator's next tool call, as an injected page steers a model.

The simulator calls a tool when the user's last message is a `/tool NAME {json}`
line (simulated_reply.py): text the user typed, which flow_guard trusts. To
show what flow_guard is for, a tool result can do the same: when the last
message returns tool results and one of them holds a line

    /tool NAME {"some": "json object"}

the simulator answers with that call, as a model obeys a fetched page that
says "now run this". Only a line whose whole rest is a JSON object steers (a
page's prose that merely mentions `/tool` does not), and a tool result never
makes the simulator refuse the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any


def _result_texts(content: Any) -> Iterator[str]:
    """The text of each tool result in a message's content (a string, or its text blocks)."""
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        inner = block.get("content")
        if isinstance(inner, str):
            yield inner
        elif isinstance(inner, list):
            for part in inner:
                if isinstance(part, dict) and part.get("type") == "text":
                    yield str(part.get("text", ""))


def steered_call(body: dict[str, Any], trigger: str) -> tuple[str, dict[str, Any]] | None:
    """(tool, input) of the first `trigger` line in the last message's tool results, if any."""
    line = re.compile(rf"^[ \t]*{re.escape(trigger)}[ \t]+(\S+)[ \t]+(\{{.*\}})[ \t]*$", re.M)
    last = body["messages"][-1]
    for text in _result_texts(last.get("content") if isinstance(last, dict) else None):
        for found in line.finditer(text):
            try:
                tool_input = json.loads(found.group(2))
            except ValueError:
                continue
            if isinstance(tool_input, dict):
                return found.group(1), tool_input
    return None
