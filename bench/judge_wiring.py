"""Figure (19): `judge eval`'s wiring on the shipped cases, against the simulator (issue 41).

The simulator (the local run's, answering judge calls by markers) serves on
loopback behind a recorder that keeps every judge request and the verdict it
got. Each shipped case set runs through `judge eval`'s own replay
(policy_gateway.cli.judge_eval), one case at a time, twice: as shipped (no
marker: the simulator allows whatever it is asked about) and marked (every
block labelled `block` carries `[judge:block]`: in the tool call's input for
the presets, in the user's task for the escalations), so both verdicts flow.
The wiring is exact when:

- every block's verdict is the simulator's: the decision the simulator gave
  for that block when the policy asked about it, and `allow` when the policy
  never asked (a pre-filter skipped it, or flow_guard found it untainted);
- every sink call the escalation set labels flagged reached the judge exactly
  once, and no other did.

The figures are of the wiring, never of a model: the simulator decides by markers.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policy_gateway.cli.judge_cases import Case, read_cases
from policy_gateway.cli.judge_eval import Judging, evaluate, judging_policies
from policy_gateway.local.standins import serve_simulator

from .harness import Environment
from .report import Figure

EXAMPLES = Path(__file__).parent.parent / "examples" / "judge"
SETS = (
    ("presets", EXAMPLES / "presets-chain.json", EXAMPLES / "presets.jsonl"),
    ("escalation", EXAMPLES / "escalation-chain.json", EXAMPLES / "escalation.jsonl.gz"),
)
MARKER = " [judge:block]"
_DELIMITED = re.compile(r"<(judged-data-[0-9a-f]+)>\n(.*)\n</\1>", re.DOTALL)


class Recorder:
    """ASGI middleware: each judge request's judged block and the decision it was given."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.asked: list[tuple[Any, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        sent: list[bytes] = []
        given = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def replay() -> Any:
            return next(given, {"type": "http.disconnect"})

        async def keep(message: Any) -> None:
            if message["type"] == "http.response.body":
                sent.append(message.get("body", b""))
            await send(message)

        await self.app(scope, replay, keep)
        request = json.loads(body)
        match = _DELIMITED.search(str(request["messages"][-1]["content"]))
        if match is not None:
            self.asked.append((json.loads(match.group(2))["block"], _decision(b"".join(sent))))


def _decision(answer: bytes) -> str:
    calls = [b for b in json.loads(answer).get("content", []) if b.get("type") == "tool_use"]
    return str(calls[0]["input"]["decision"]) if calls else "error"


def _judged_form(block: dict[str, Any]) -> dict[str, Any]:
    """A block as the judge core puts it in the judged data."""
    if block.get("type") == "text":
        return {"type": "text", "text": block["text"]}
    return {"type": "tool_use", "name": block["name"], "input": block["input"]}


def _mark_input(tool_input: Any) -> Any:
    """The input with the marker after its longest string value."""
    strings = [key for key, value in tool_input.items() if isinstance(value, str)]
    if strings:
        longest = max(strings, key=lambda key: len(tool_input[key]))
        tool_input = {**tool_input, longest: tool_input[longest] + MARKER}
    return tool_input


def marked(case: Case) -> Case:
    """The case with the marker on what it labels `block`."""
    if "block" not in case.expected:
        return case
    conversation, answer = copy.deepcopy(case.conversation), copy.deepcopy(case.answer)
    if case.escalated is not None:
        first = conversation["messages"][0]
        first["content"] = str(first["content"]) + MARKER
    else:
        for block, label in zip(answer["content"], case.expected, strict=True):
            if label == "block" and block.get("type") == "tool_use":
                block["input"] = _mark_input(block["input"])
            elif label == "block" and block.get("type") == "text":
                block["text"] += MARKER
    return replace(case, conversation=conversation, answer=answer)


@dataclass
class Tally:
    blocks: int = 0
    judged: int = 0
    skipped: int = 0
    blocked: int = 0
    wrong: list[str] = field(default_factory=list)
    escalations_expected: int = 0
    escalated_once: int = 0
    untainted_escalated: int = 0


def _check(judging: Judging, case: Case, asked: list[tuple[Any, str]], tally: Tally) -> None:
    got = judging.verdicts[case.id]
    for number, block in enumerate(case.answer["content"]):
        form = _judged_form(block) if block.get("type") in ("text", "tool_use") else None
        decisions = [decision for judged, decision in asked if judged == form]
        simulator = decisions[0] if decisions else "allow"
        if simulator == "error":
            simulator = "block"
        tally.blocks += 1
        tally.judged += bool(decisions)
        tally.skipped += not decisions
        tally.blocked += got[number] == "block"
        if got[number] != simulator:
            tally.wrong.append(f"{case.id}[{number}]")
        if case.escalated is None:
            continue
        if case.escalated[number]:
            tally.escalations_expected += 1
            tally.escalated_once += len(decisions) == 1
        else:
            tally.untainted_escalated += len(decisions)


async def _run(policies: list[Judging], cases: list[Case], recorder: Recorder, url: str) -> Tally:
    tally = Tally()
    for judging in policies:
        for case in cases:
            if not case.targets(judging.name, judging.options):
                continue
            before = len(recorder.asked)
            await evaluate([judging], [case], url, 1)
            _check(judging, case, recorder.asked[before:], tally)
    return tally


def wiring(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    recorders: list[Recorder] = []

    def record(app: Any) -> Recorder:
        recorders.append(Recorder(app))
        return recorders[-1]

    url = serve_simulator(record)
    figures: list[Figure] = []
    results: dict[str, Any] = {}
    variants: tuple[tuple[str, Callable[[Case], Case]], ...] = (
        ("as shipped", lambda case: case),
        ("marked", marked),
    )
    for name, chain, path in SETS:
        for variant, change in variants:
            cases = [change(case) for case in read_cases(path)]
            policies = judging_policies(chain.read_text())
            tally = asyncio.run(_run(policies, cases, recorders[0], url))
            results[f"{name}/{variant}"] = tally.__dict__
            exact = 100 * (tally.blocks - len(tally.wrong)) / max(tally.blocks, 1)
            detail = (
                f"{tally.blocks} blocks of {len(cases)} cases: {tally.judged} judged, "
                f"{tally.skipped} not asked about, {tally.blocked} blocked; "
                f"not the simulator's: {len(tally.wrong)} {tally.wrong[:3]}"
            )
            figures.append(
                Figure(
                    f"(19) judge eval, {name} ({variant}): verdicts that are the simulator's",
                    exact,
                    "%",
                    "= 100 %",
                    not tally.wrong,
                    detail,
                )
            )
            if name == "escalation":
                once = tally.escalated_once == tally.escalations_expected
                figures.append(
                    Figure(
                        f"(19) judge eval, escalation ({variant}): flagged calls escalated once",
                        tally.escalated_once,
                        "calls",
                        f"= {tally.escalations_expected}, 0 untainted",
                        once and tally.untainted_escalated == 0,
                        f"{tally.escalated_once}/{tally.escalations_expected} flagged sink calls "
                        f"reached the judge exactly once; untainted calls that reached it: "
                        f"{tally.untainted_escalated}",
                    )
                )
    raw["judge_eval_wiring"] = results
    return figures
