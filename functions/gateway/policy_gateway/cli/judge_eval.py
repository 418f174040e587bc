"""`policy-gateway judge eval`: measure a chain's judges on labelled cases before trusting them.

    policy-gateway judge eval --chain FILE --cases FILE.jsonl[.gz] [--simulate]
                              [--concurrency N] [--json]

Every policy of the chain's default `policies` that holds a judge
(gateway_policies.judge: `rules_judge`, `tool_call_judge`, `flow_guard` with
`on_taint: "judge"`) is built alone, as the gateway builds it (shadow entries
as enforcing ones), and each case meant for it (judge_cases) is replayed
through the policy interface: the conversation as the request, then the
answer as the upstream's JSON reply. What the policy made of each answer block
is its verdict: a tool call still there is allowed, one turned into a note is
blocked; a text block kept is allowed, one changed is blocked or replaced (as
its judge record says). Printed per policy: the confusion table (expected by
what the policy did), the judge calls, their errors, tokens and latency
percentiles, and for an escalating policy the escalations against the cases'
`escalated` labels.

Which model answers: an Anthropic-provider judge with a `base_url` calls that;
else, when its key variable (`api_key_env`, default ANTHROPIC_API_KEY) is
set, the real API (or UPSTREAM_BASE_URL); else, or with `--simulate`, the
built-in simulator (started on loopback; it allows what no marker asks to
block, docs/policies.md). A Bedrock judge calls Bedrock with the AWS
configuration. Cases run `--concurrency` at a time (default 4).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway_policies import JSONObject, Policy, PolicyContext
from gateway_policies.exceptions import PolicyConfigError
from gateway_policies.judge.core import Judge
from gateway_policies.judge.record import JudgeCall
from gateway_policies.runtime.chain import PolicyChain
from gateway_policies.runtime.loader import load_chain, load_document

from .. import settings
from .commands import say
from .judge_cases import VERDICTS, Case, CaseError, read_cases

MODEL = "claude-sonnet-4-6"
MAX_TOKENS = 1024
CALLER = "judge-eval"
NOT_LABELLED = "-"
PERCENTILES = (50, 90, 99)
CORNER = "expected \\ given"


@dataclass
class Judging:
    """One judging policy of the chain, as the eval reports on it."""

    index: int
    name: str
    options: dict[str, Any]
    policy: Policy[Any]
    judges: list[Judge]
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)
    calls: list[JudgeCall] = field(default_factory=list)
    cases: int = 0
    escalations_expected: int = 0
    escalations_made: int = 0
    escalation_mismatches: list[str] = field(default_factory=list)
    verdicts: dict[str, list[str]] = field(default_factory=dict)
    """Per case id, what the policy made of each answer block (for figure (19))."""

    @property
    def label(self) -> str:
        described = ", ".join(
            f"{key} {value}" for key, value in self.options.items() if key in ("preset", "use")
        )
        return f"#{self.index + 1} {self.name}" + (f" ({described})" if described else "")

    @property
    def escalates(self) -> bool:
        return self.escalations_expected > 0 or self.escalations_made > 0


def _judges(policy: Policy[Any]) -> list[Judge]:
    return [value for value in vars(policy).values() if isinstance(value, Judge)]


def judging_policies(chain_text: str) -> list[Judging]:
    """The chain's judging policies, each built alone; PolicyConfigError for a bad chain."""
    load_document(chain_text)
    entries = json.loads(chain_text)["policies"]
    found: list[Judging] = []
    for index, entry in enumerate(entries):
        options = dict(entry.get("options") or {})
        alone = load_chain({"policies": [{"policy": entry["policy"], "options": options}]})
        (policy,) = alone.policies
        judges = _judges(policy)
        if judges:
            found.append(Judging(index, policy.label, options, policy, judges))
    return found


def _request(case: Case) -> JSONObject:
    request: JSONObject = {"model": MODEL, "max_tokens": MAX_TOKENS, **case.conversation}
    request["stream"] = False
    return request


def _answer(case: Case) -> JSONObject:
    content = copy.deepcopy(case.answer["content"])
    for number, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "tool_use" and "id" not in block:
            block["id"] = f"toolu_eval_{number:03d}"
    return {
        "id": "msg_judge_eval",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": case.answer.get("stop_reason", "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def block_verdicts(
    sent: Sequence[Any], received: Sequence[Any], text_verdicts: Iterable[str]
) -> list[str]:
    """What the policy made of each block of `sent`, read from `received` (the answer as the
    client would get it) and, for changed text blocks, the text judges' verdicts in order."""
    kept_calls = {
        block.get("id")
        for block in received
        if isinstance(block, dict) and block.get("type") == "tool_use"
    }
    kept_texts = Counter(
        block.get("text")
        for block in received
        if isinstance(block, dict) and block.get("type") == "text"
    )
    changed = iter([verdict for verdict in text_verdicts if verdict != "allow"])
    verdicts: list[str] = []
    for block in sent:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            verdicts.append("allow" if block.get("id") in kept_calls else "block")
        elif kind == "text" and kept_texts[block.get("text")] > 0:
            kept_texts[block.get("text")] -= 1
            verdicts.append("allow")
        elif kind == "text":
            verdicts.append(next(changed, "block"))
        else:
            verdicts.append("allow")
    return verdicts


async def _replay(judging: Judging, case: Case, base_url: str | None) -> None:
    ctx = PolicyContext(
        endpoint="messages",
        stream=False,
        call_id=f"judge-eval-{case.id}",
        caller=CALLER,
        upstream_base_url=base_url,
    )
    chain = PolicyChain([judging.policy])
    await chain.apply_request(_request(case), ctx)
    answer = _answer(case)
    sent = copy.deepcopy(answer["content"])
    await chain.apply_response(answer, ctx)
    records = [a for a in ctx.actions if a.action == "judge"]
    texts = [str(a.details.get("verdict")) for a in records if a.details.get("kind") == "text"]
    got = block_verdicts(sent, answer["content"], texts)
    judging.verdicts[case.id] = got
    for expected, verdict in zip(case.expected, got, strict=True):
        judging.confusion[(expected or NOT_LABELLED, verdict)] += 1
    judging.calls += ctx.judge_calls
    judging.cases += 1
    made = sum(1 for a in records if a.details.get("escalated") is True)
    wanted = sum(case.escalated or [])
    judging.escalations_made += made
    judging.escalations_expected += wanted
    if case.escalated is not None and made != wanted:
        judging.escalation_mismatches.append(case.id)


async def evaluate(
    policies: list[Judging], cases: list[Case], base_url: str | None, concurrency: int = 4
) -> None:
    """Replay each case through each policy it is meant for, `concurrency` cases at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(judging: Judging, case: Case) -> None:
        async with gate:
            await _replay(judging, case, base_url)

    work = [
        one(judging, case)
        for judging in policies
        for case in cases
        if case.targets(judging.name, judging.options)
    ]
    try:
        await asyncio.gather(*work)
    finally:
        for judging in policies:
            for judge in judging.judges:
                await judge.aclose()


def percentile(values: Sequence[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] if ordered else 0.0


def summary(judging: Judging) -> JSONObject:
    """One policy's figures, as `--json` prints them."""
    latencies = [call.latency_ms for call in judging.calls]
    agreed = sum(n for (want, got), n in judging.confusion.items() if want == got)
    labelled = sum(n for (want, _), n in judging.confusion.items() if want != NOT_LABELLED)
    return {
        "policy": judging.label,
        "cases": judging.cases,
        "confusion": {f"{want}->{got}": n for (want, got), n in sorted(judging.confusion.items())},
        "agreement": round(agreed / labelled, 4) if labelled else None,
        "judge_calls": len(judging.calls),
        "judge_errors": dict(Counter(call.error for call in judging.calls if call.error)),
        "input_tokens": sum(call.input_tokens for call in judging.calls),
        "output_tokens": sum(call.output_tokens for call in judging.calls),
        "latency_ms": {f"p{p}": percentile(latencies, p) for p in PERCENTILES},
        "escalations": {
            "expected": judging.escalations_expected,
            "made": judging.escalations_made,
            "mismatched_cases": judging.escalation_mismatches,
        },
    }


def table(judging: Judging) -> list[str]:
    """The confusion table: a row per expected verdict, a column per verdict given."""
    rows = [*VERDICTS, NOT_LABELLED]
    wanted = [row for row in rows if any(judging.confusion[(row, got)] for got in VERDICTS)]
    lines = [f"{CORNER:<18}" + "".join(f"{got:>9}" for got in VERDICTS)]
    for row in wanted:
        lines.append(
            f"{row:<18}" + "".join(f"{judging.confusion[(row, got)]:>9}" for got in VERDICTS)
        )
    return lines


def report(judging: Judging) -> list[str]:
    figures = summary(judging)
    errors = ", ".join(f"{kind} {n}" for kind, n in figures["judge_errors"].items()) or "none"
    latency = figures["latency_ms"]
    agreement = figures["agreement"]
    lines = [
        f"{judging.label}: {judging.cases} cases",
        *(f"  {line}" for line in table(judging)),
        "  agreement with the labels: "
        + ("-" if agreement is None else f"{100 * agreement:.1f} %"),
        f"  judge calls {figures['judge_calls']} (errors: {errors}); tokens in "
        f"{figures['input_tokens']}, out {figures['output_tokens']}; latency "
        + ", ".join(f"p{p} {latency[f'p{p}']:.1f} ms" for p in PERCENTILES),
    ]
    if judging.escalates:
        mismatched = judging.escalation_mismatches
        lines.append(
            f"  escalations: {judging.escalations_made} made, "
            f"{judging.escalations_expected} expected; cases escalated otherwise than "
            f"labelled: {len(mismatched)}"
            + (f" ({', '.join(mismatched[:5])})" if mismatched else "")
        )
    return lines


def _keyed(policies: list[Judging], env: dict[str, str]) -> bool:
    """Whether every Anthropic judge of the chain has a key or a base_url of its own."""
    for judging in policies:
        for judge in judging.judges:
            options = judge.options
            if options.provider == "anthropic" and not (
                options.base_url or env.get(options.api_key_env)
            ):
                return False
    return True


def run(args: argparse.Namespace) -> int:
    try:
        chain_text = Path(args.chain).read_text(encoding="utf-8")
        policies = judging_policies(chain_text)
        cases = read_cases(Path(args.cases))
    except OSError as exc:
        say(f"policy-gateway judge eval: cannot read {args.chain}: {exc.strerror or exc}")
        return 1
    except (PolicyConfigError, CaseError) as exc:
        say(f"policy-gateway judge eval: {exc}")
        return 1
    if not policies:
        say(f"policy-gateway judge eval: {args.chain} has no judging policy")
        return 1
    env = settings.environment()
    if args.simulate or not _keyed(policies, env):
        from ..local.standins import serve_simulator

        base_url: str | None = serve_simulator()
        where = f"the built-in simulator at {base_url} (no key: nothing leaves this machine)"
    else:
        base_url = env.get(settings.ENV_UPSTREAM_BASE_URL) or None
        where = f"the judges' own endpoints ({base_url or 'the Anthropic API'} by default)"
    say(f"judge eval: {len(cases)} cases from {args.cases}, chain {args.chain}")
    say(f"judging with {where}")
    # Each judge error is counted in the report; its WARNING line would only repeat it. The
    # level is put back after: a caller in the same process (a test) keeps its judge's lines.
    judge_log = logging.getLogger("gateway_policies.judge")
    level = judge_log.level
    judge_log.setLevel(logging.ERROR)
    try:
        asyncio.run(evaluate(policies, cases, base_url, args.concurrency))
    finally:
        judge_log.setLevel(level)
    if args.json:
        print(json.dumps([summary(judging) for judging in policies], indent=2))
        return 0
    for judging in policies:
        print("\n".join(report(judging)))
    return 0


def register(commands: Any) -> None:
    judge = commands.add_parser("judge", help="measure the chain's judges on labelled cases")
    actions = judge.add_subparsers(dest="action", required=True)
    evaluate_cases = actions.add_parser(
        "eval", help="replay labelled cases through the chain's judging policies"
    )
    evaluate_cases.add_argument("--chain", required=True, help="a policy chain JSON file")
    evaluate_cases.add_argument(
        "--cases", required=True, help="labelled cases, JSON Lines (.jsonl or .jsonl.gz)"
    )
    evaluate_cases.add_argument(
        "--simulate",
        action="store_true",
        help="judge with the built-in simulator even when a key is configured",
    )
    evaluate_cases.add_argument(
        "--concurrency", type=int, default=4, help="cases replayed at once (default %(default)s)"
    )
    evaluate_cases.add_argument(
        "--json", action="store_true", help="print the figures as JSON instead of tables"
    )
    evaluate_cases.set_defaults(handler=run)
