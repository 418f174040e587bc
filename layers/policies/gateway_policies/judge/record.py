"""What one judge call cost, as the gateway's call line and metrics count it.

Kept apart from the core (and free of pydantic) because `PolicyContext`
carries a list of these, and the gateway reads them without importing a
judge: `judge_usage` on the call line sums the tokens, and JudgeCalls,
JudgeErrors and JudgeLatency count them by `policy`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JudgeCall:
    """One request a judging policy sent to its model (a memo hit sends none, so is none)."""

    policy: str
    provider: str
    model: str
    latency_ms: float
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    """The judge error's kind (`errors.KINDS`) when the call gave no verdict."""
    shadow: bool = False
