"""What a blocked tool call looks like, apart from the gate that decides it (tool_gate.py).

A verdict (`Verdict`: nothing, a reason, or a `Block` with the details the audit trail
records), the text a blocked call is replaced by and the note a withheld result becomes,
and a complete text block as stream events: what every policy that replaces a tool call
or a text block (the gates, rules_judge's notes) says to the client, in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import StreamEvent

UNREADABLE = "its input is not valid JSON, so it could not be checked"


def blocked_text(policy: str, tool: str, reason: str, *, upstream: bool = False) -> str:
    if upstream:
        return (
            f"[Policy Gateway: {policy} blocked a call to tool {tool!r}, which had already run "
            f"upstream: {reason}; its result is withheld]"
        )
    return f"[Policy Gateway: {policy} blocked a call to tool {tool!r}: {reason}]"


def withheld_text(policy: str, tool: str) -> str:
    return f"[Policy Gateway: {policy} withheld the result of the blocked call to tool {tool!r}]"


@dataclass(frozen=True)
class Block:
    """A verdict that blocks, and what the audit trail records about it besides the tool.

    `details` follow `PolicyContext.record`'s rule: kinds, names and ids, never content.
    """

    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)


Verdict = str | Block | None
"""What `blocked` returns: None to let the call through, else why (a reason, or a Block)."""


def as_block(verdict: Verdict) -> Block | None:
    return Block(verdict) if isinstance(verdict, str) else verdict


def text_block_events(index: Any, text: str, stop: StreamEvent | None) -> list[StreamEvent]:
    """A complete text block at `index`: start, one delta, and `stop` (or a new one)."""
    return [
        StreamEvent.from_json(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        StreamEvent.from_json(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        stop
        or StreamEvent.from_json(
            "content_block_stop", {"type": "content_block_stop", "index": index}
        ),
    ]
