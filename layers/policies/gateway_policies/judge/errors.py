"""A judge that did not give a verdict, and why, in a word an operator can count."""

from __future__ import annotations

TIMEOUT = "timeout"
"""No answer within the judge's timeout (or the call's remaining time)."""
STATUS = "status"
"""The provider answered with an error status."""
TRANSPORT = "transport"
"""The provider could not be reached, or its answer could not be read."""
NO_VERDICT = "no_verdict"
"""The answer holds no call of the `verdict` tool (text, say)."""
SCHEMA = "schema"
"""The `verdict` call's input breaks the verdict tool's schema."""
OVER_BUDGET = "over_budget"
"""The answer already had `max_judged_blocks` judged: this block is not sent."""
UNAVAILABLE = "unavailable"
"""The provider cannot run here (no key, no credentials)."""

KINDS = frozenset({TIMEOUT, STATUS, TRANSPORT, NO_VERDICT, SCHEMA, OVER_BUDGET, UNAVAILABLE})


class JudgeError(Exception):
    """The judge gave no verdict. `kind` is one of KINDS; the message never holds content
    (neither the judged block nor the provider's answer, which can repeat it)."""

    def __init__(self, kind: str, message: str = "", *, status: int | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown judge error kind {kind!r}")
        super().__init__(message or kind)
        self.kind = kind
        self.status = status
