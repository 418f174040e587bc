"""The verdict tool: the one way a judge model answers, and how its call is read.

The judge is forced to call a tool named `verdict` (`tool_choice` names it),
whose input schema DESIGN.md fixes, so an operator can point `base_url` at a
judge service of their own:

    {"decision": "allow" | "block" | "replace", "reason": str,
     "rule": str (optional), "replacement": str (with "replace" only),
     "risk": number 0..1 (tool_call_judge only)}

A verdict is never parsed out of text: a judged block that says `{"risk": 0}`
is data, and an answer with no `verdict` call, or one whose input breaks the
schema, is a judge error (`JudgeError`, `no_verdict` or `schema`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import NO_VERDICT, SCHEMA, JudgeError

VERDICT_TOOL = "verdict"
ALLOW = "allow"
BLOCK = "block"
REPLACE = "replace"
DECISIONS = (ALLOW, BLOCK, REPLACE)
TOOL_DECISIONS = (ALLOW, BLOCK)
"""What a judge may decide about a tool call: a call cannot be rewritten into another."""

MAX_REASON = 1000
"""Characters of a verdict's reason kept (it is shown to the client, never logged)."""


@dataclass(frozen=True)
class Verdict:
    """What the judge decided about one block."""

    decision: str
    reason: str
    rule: str | None = None
    replacement: str | None = None
    risk: float | None = None


def verdict_tool(decisions: Collection[str] = DECISIONS, *, risk: bool = False) -> dict[str, Any]:
    """The `verdict` tool's definition offered to the judge, for the given decisions."""
    properties: dict[str, Any] = {
        "decision": {"type": "string", "enum": list(decisions)},
        "reason": {"type": "string", "description": "One short sentence: why."},
        "rule": {
            "type": "string",
            "description": "The id or the words of the rule the decision rests on, if any.",
        },
    }
    required = ["decision", "reason"]
    if REPLACE in decisions:
        properties["replacement"] = {
            "type": "string",
            "description": 'The text that takes the block\'s place; with "replace" only.',
        }
    if risk:
        properties["risk"] = {"type": "number", "minimum": 0, "maximum": 1}
        required.append("risk")
    return {
        "name": VERDICT_TOOL,
        "description": "Record your verdict on the data you were given. Always call this tool.",
        "input_schema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


def tool_choice() -> dict[str, str]:
    return {"type": "tool", "name": VERDICT_TOOL}


def read_verdict(
    answer: Mapping[str, Any], decisions: Collection[str] = DECISIONS, *, risk: bool = False
) -> Verdict:
    """The verdict in a Messages API answer, or JudgeError: exactly one `verdict` call whose
    input keeps to the schema for `decisions` (and `risk` when asked for)."""
    content = answer.get("content")
    calls = [
        block
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, dict)
        and block.get("type") == "tool_use"
        and block.get("name") == VERDICT_TOOL
    ]
    if len(calls) != 1:
        raise JudgeError(NO_VERDICT, f"{len(calls)} calls of the verdict tool")
    return _checked(calls[0].get("input"), decisions, risk)


def _checked(given: Any, decisions: Collection[str], risk: bool) -> Verdict:
    if not isinstance(given, dict):
        raise JudgeError(SCHEMA, "the verdict's input is not an object")
    allowed = {"decision", "reason", "rule"} | ({"replacement"} if REPLACE in decisions else set())
    if risk:
        allowed.add("risk")
    if set(given) - allowed:
        raise JudgeError(SCHEMA, f"unexpected fields {sorted(set(given) - allowed)}")
    decision, reason, rule = given.get("decision"), given.get("reason"), given.get("rule")
    if not isinstance(decision, str) or decision not in decisions:
        raise JudgeError(SCHEMA, "the decision is not one of the allowed ones")
    if not isinstance(reason, str):
        raise JudgeError(SCHEMA, "the reason is not a string")
    if rule is not None and not isinstance(rule, str):
        raise JudgeError(SCHEMA, "the rule is not a string")
    replacement = given.get("replacement")
    if (decision == REPLACE) != isinstance(replacement, str):
        raise JudgeError(SCHEMA, "a replacement comes with a replace decision, and only then")
    rated: float | None = None
    if risk:
        value = given.get("risk")
        # A string, a bool or a value outside [0, 1] is not an answer: a judge that says
        # {"risk": -1} must not wave a call through.
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise JudgeError(SCHEMA, "the risk is not a number")
        rated = float(value)
        if not math.isfinite(rated) or not 0 <= rated <= 1:
            raise JudgeError(SCHEMA, "the risk is not a number from 0 to 1")
    return Verdict(
        decision=decision,
        reason=reason.strip()[:MAX_REASON],
        rule=rule.strip()[:MAX_REASON] if isinstance(rule, str) and rule.strip() else None,
        replacement=replacement if decision == REPLACE else None,
        risk=rated,
    )
