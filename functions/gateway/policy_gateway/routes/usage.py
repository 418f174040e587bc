"""The tokens an answer reports, as the call's log line and metrics count them.

A JSON answer's `usage` and `model`; a stream's `message_start` (the model,
and the input and cache counts) and each `message_delta` (whose counts are
cumulative, so the last one seen is the stream's total so far). A stream cut
short reports what it had seen. Only those two events are parsed, apart from
whatever the policies parse: every other event is judged by its cheap `type`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gateway_policies import StreamEvent

from ..call import TOKEN_FIELDS, Usage

USAGE_EVENTS = frozenset({"message_start", "message_delta"})


def _counts(usage: Any) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    counts: dict[str, int] = {}
    for name in TOKEN_FIELDS:
        value = usage.get(name)
        # Integers only: a bool is an int to Python, not a count to the API.
        if type(value) is int and value >= 0:
            counts[name] = value
    return counts


def add_message_usage(into: Usage, message: Mapping[str, Any]) -> None:
    """Add a Messages response's usage, under the model it names, when it has both."""
    model = message.get("model")
    usage = message.get("usage")
    if isinstance(model, str) and isinstance(usage, dict):
        into.add(model, _counts(usage))


def add_body_usage(into: Usage, body: bytes) -> None:
    """`add_message_usage` for an answer nobody parsed."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return
    if isinstance(message, dict):
        add_message_usage(into, message)


class StreamUsage:
    """What one stream has reported so far."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.counts: dict[str, int] = {}

    def see(self, event: StreamEvent, kind: str) -> None:
        """Read `event`, a `message_start` or `message_delta`, leaving it as it was."""
        try:
            payload = json.loads(event.data)
        except (ValueError, RecursionError):
            return
        if not isinstance(payload, dict):
            return
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                model = message.get("model")
                self.model = model if isinstance(model, str) else None
                self.counts.update(_counts(message.get("usage")))
        else:
            self.counts.update(_counts(payload.get("usage")))

    def report(self, into: Usage) -> None:
        if self.model is not None:
            into.add(self.model, self.counts)
