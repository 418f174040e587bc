"""What `history list` and the page share: the filters, the time stamps, a conversation's
first words."""

from __future__ import annotations

from datetime import UTC, datetime

from ..records.archive import Conversation
from ..records.transcript import transcript
from .logs import since_seconds
from .operator_errors import OperatorError


def since_epoch(text: str | None, now: float) -> float | None:
    """`--since`/`--before`: a duration ago (30m, 2h, 1d) or a date (2026-12-01, ISO 8601)."""
    if not text:
        return None
    try:
        return now - since_seconds(text)
    except OperatorError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise OperatorError(
            f"{text!r} is neither a duration nor a date",
            "use e.g. 2h, 1d, 2026-12-01 or 2026-12-01T08:00:00+00:00",
            exit_code=2,
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def selected(
    found: list[Conversation], since: float | None, marks: list[str] | None
) -> list[Conversation]:
    return [
        conversation
        for conversation in found
        if (since is None or conversation.updated >= since)
        and set(marks or ()) <= conversation.marks()
    ]


def stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def first_words(conversation: Conversation, limit: int = 60) -> str:
    for entry in transcript(conversation, conversation.calls[0]):
        if entry.kind == "user" and entry.text.strip():
            text = " ".join(entry.text.split())
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return ""
