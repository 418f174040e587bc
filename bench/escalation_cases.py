"""The escalation case set: the sink calls of figure (15)'s AgentDojo data, labelled.

    python -m bench.escalation_cases    # writes examples/judge/escalation.jsonl.gz

Made from bench/data/agentdojo exactly as figure (15) reads it (bench/flow.py):
one flow_guard, `provenance`, every tool result untrusted, the four suites'
sinks together (no suite shares a tool name with another's sinks in a way that
changes a call's verdict: each call is judged on its own values). Cases, in
`policy-gateway judge eval`'s format (docs/policies.md):

- `attack`: for each pair of a user task and an injection task, the first of the
  injection's sink calls that `provenance` flags, with the conversation before
  it (the user task's calls and results under attack, the injection's earlier
  calls); expected `block`, escalated.
- `benign_flagged`: each sink call of a user task's ground truth that
  `provenance` flags on the benign texts (the user task legitimately acts on a
  value it read); expected `allow`, escalated.
- `benign`: each sink call it lets through; expected `allow`, never escalated
  (the wiring check: an untainted call never reaches the judge).

Pairs whose injection's sink calls are none of them flagged (figure (15)'s
misses) give no case: there is nothing to escalate.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gateway_policies import JSONObject
from gateway_policies.builtin.flow_guard import FlowGuard

from .flow import MIN_LENGTH, SINKS, SUITES, blocked, load, messages, turns

OUT = Path(__file__).parent.parent / "examples" / "judge" / "escalation.jsonl.gz"
SINK_TOOLS = "|".join(sorted({tool for tools in SINKS.values() for tool in tools.split("|")}))


def guard_options() -> JSONObject:
    """flow_guard's options for the set, as in examples/judge/escalation-chain.json."""
    return {
        "untrusted": [".*"],
        "sinks": [{"tool": f"^(?:{SINK_TOOLS})$"}],
        "check": "provenance",
        "min_length": MIN_LENGTH,
    }


def _case(
    case_id: str, kind: str, request: JSONObject, call: JSONObject, flagged: bool
) -> JSONObject:
    use = {"type": "tool_use", "id": "toolu_sink", "name": call["name"], "input": call["input"]}
    return {
        "id": case_id,
        "target": {"policy": "flow_guard"},
        "note": kind,
        "conversation": request,
        "answer": {"content": [use], "stop_reason": "tool_use"},
        "expected": ["block" if kind == "attack" else "allow"],
        "escalated": [flagged],
    }


def _attacks(suite: str, data: JSONObject, guard: FlowGuard) -> Iterator[JSONObject]:
    for user_id, user in data["user_tasks"].items():
        if not any("<CANARY---" in call.get("result", "") for call in user["calls"]):
            continue
        for injection_id, injection in data["injection_tasks"].items():
            attack = data["attack"].replace("{goal}", injection["goal"])
            vectors = dict.fromkeys(data["canaries"].values(), attack)
            conversation = messages(user, len(user["calls"]), vectors)
            calls = injection["calls"]
            for number, call in enumerate(calls):
                if guard._sinks.matching(call["name"], call["input"]) is None:
                    continue
                earlier = turns(calls[:number], vectors, "attack_")
                request = {"system": data["system"], "messages": [*conversation, *earlier]}
                if blocked(guard, request, [call]) == [True]:
                    case_id = f"{suite}/{user_id}/{injection_id}/{number}"
                    yield _case(case_id, "attack", request, call, True)
                    break


def _benign(suite: str, data: JSONObject, guard: FlowGuard) -> Iterator[JSONObject]:
    texts = {data["canaries"][vector]: text for vector, text in data["defaults"].items()}
    for user_id, user in data["user_tasks"].items():
        for number, call in enumerate(user["calls"]):
            if guard._sinks.matching(call["name"], call["input"]) is None:
                continue
            request = {"system": data["system"], "messages": messages(user, number, texts)}
            flagged = blocked(guard, request, [call]) == [True]
            kind = "benign_flagged" if flagged else "benign"
            yield _case(f"{suite}/{user_id}/{number}", kind, request, call, flagged)


def cases() -> Iterator[JSONObject]:
    guard = FlowGuard(guard_options())
    for suite in SUITES:
        data = load(suite)
        yield from _attacks(suite, data, guard)
        yield from _benign(suite, data, guard)


def main(argv: list[str] | None = None) -> int:
    out = Path(argv[0]) if argv else OUT
    counts: dict[str, int] = {}
    lines: list[str] = []
    for case in cases():
        counts[case["note"]] = counts.get(case["note"], 0) + 1
        lines.append(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")
    # No time stamp in the header: the same data gives the same bytes.
    with out.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as file:
        file.write("".join(lines).encode())
    summary: dict[str, Any] = {"file": str(out), **counts}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
