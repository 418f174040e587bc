"""The labelled cases `policy-gateway judge eval` replays, read from JSON Lines.

One case a line (examples/judge/ ships two sets; docs/policies.md describes
the format):

    {"id": "...", "target": {"policy": "rules_judge", "preset": "..."},
     "conversation": {"system": ..., "messages": [...]},
     "answer": {"content": [...], "stop_reason": "tool_use"},
     "expected": ["allow", "block", ...], "escalated": [true, ...], "note": "..."}

`expected` holds one verdict per answer block (`allow`, `block` or `replace`;
`null` for a block the case does not label). `target` picks the chain's
policies the case is for: its `policy` is a policy's name, every other key an
option that policy must have with that value; without a target the case is
for every judging policy. `escalated` (optional, flow_guard) says which blocks
a policy that escalates to the judge must escalate. A case the reader cannot
use is refused with its line number, before any judge is called.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERDICTS = ("allow", "block", "replace")


class CaseError(ValueError):
    """A case file the eval cannot use; the message names the line."""


@dataclass(frozen=True)
class Case:
    id: str
    conversation: dict[str, Any]
    answer: dict[str, Any]
    expected: list[str | None]
    target: dict[str, Any] = field(default_factory=dict)
    escalated: list[bool] | None = None
    note: str = ""

    def targets(self, name: str, options: Mapping[str, Any]) -> bool:
        """Whether this case is for the policy `name` with `options` (as written in the chain)."""
        for key, value in self.target.items():
            if key == "policy":
                if value != name:
                    return False
            elif options.get(key) != value:
                return False
        return True


def _problem(line: int, message: str) -> CaseError:
    return CaseError(f"line {line}: {message}")


def _case(raw: Any, line: int) -> Case:
    if not isinstance(raw, dict):
        raise _problem(line, "a case is a JSON object")
    case_id = raw.get("id", f"line-{line}")
    if not isinstance(case_id, str):
        raise _problem(line, "id must be a string")
    conversation, answer = raw.get("conversation"), raw.get("answer")
    if not isinstance(conversation, dict) or not isinstance(conversation.get("messages"), list):
        raise _problem(line, f"{case_id}: conversation must be an object with messages")
    if not isinstance(answer, dict) or not isinstance(answer.get("content"), list):
        raise _problem(line, f"{case_id}: answer must be an object with a content list")
    content: list[Any] = answer["content"]
    expected = raw.get("expected")
    if not isinstance(expected, list) or len(expected) != len(content):
        raise _problem(line, f"{case_id}: expected must hold one verdict per answer block")
    for verdict in expected:
        if verdict is not None and verdict not in VERDICTS:
            raise _problem(line, f"{case_id}: {verdict!r} is not one of {', '.join(VERDICTS)}")
    escalated = raw.get("escalated")
    if escalated is not None and (
        not isinstance(escalated, list)
        or len(escalated) != len(content)
        or not all(isinstance(flag, bool) for flag in escalated)
    ):
        raise _problem(line, f"{case_id}: escalated must hold one true/false per answer block")
    target = raw.get("target", {})
    if not isinstance(target, dict):
        raise _problem(line, f"{case_id}: target must be an object")
    note = raw.get("note", "")
    return Case(case_id, conversation, answer, expected, target, escalated, str(note))


def read_cases(path: Path) -> list[Case]:
    """Every case of a `.jsonl` (or `.jsonl.gz`) file; blank lines are skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    cases: list[Case] = []
    seen: set[str] = set()
    try:
        with opener(path, "rt", encoding="utf-8") as lines:
            for number, text in enumerate(lines, start=1):
                if not text.strip():
                    continue
                try:
                    raw = json.loads(text)
                except ValueError as exc:
                    raise _problem(number, f"not JSON: {exc}") from None
                case = _case(raw, number)
                if case.id in seen:
                    raise _problem(number, f"{case.id}: a second case with this id")
                seen.add(case.id)
                cases.append(case)
    except OSError as exc:
        raise CaseError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not cases:
        raise CaseError(f"{path} holds no case")
    return cases
