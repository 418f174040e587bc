"""Repairs: the retry ladder's first rung, a change that keeps every policy's intent.

Structural repairs fix what the API is known to refuse, and only where a
policy's change (never the client) broke the rule, judged against the
original request:

- `empty_text_block`: a text block a policy emptied is dropped; a message
  left with no content, or whose string content a policy emptied, gets one
  text block naming the policy that emptied it (a final assistant message, a
  prefill, may be empty: it is left alone);
- `tool_choice_names_removed_tool`: a `tool_choice` naming a tool a policy
  removed becomes `auto` (or goes, when no tool is left);
- `thinking_budget_not_below_max_tokens`: a thinking budget a cap pushed to
  or above `max_tokens` is lowered to just below it (when that is still a
  valid budget).

All three are visible before sending, so they are made before the first
attempt and cost no upstream call. A scan of the request finds the
candidates; only when there is one is the original parsed to compare, and
the chain replayed to name the policy, so the hot path pays for the scan
alone.

Every repair, structural or a policy's own (`on_upstream_error`), is recorded
the same way (`record`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway_policies import JSONObject, PolicyAction, PolicyChain, PolicyContext
from gateway_policies.actions import REPAIR
from gateway_policies.numbers import json_number
from gateway_policies.runtime.diff import Location, format_path, resolve

from .. import names
from ..observability import metrics, tracing
from ..observability.logs import logger

RULE_EMPTY_TEXT = "empty_text_block"
RULE_TOOL_CHOICE = "tool_choice_names_removed_tool"
RULE_THINKING_BUDGET = "thinking_budget_not_below_max_tokens"
RULE_POLICY_HOOK = "on_upstream_error"

MIN_THINKING_BUDGET = 1024
UNATTRIBUTED = "<chain>"
"""The policy named when replaying the chain cannot tell which one broke the rule."""


@dataclass(frozen=True)
class Repair:
    """One repair: whose change it keeps valid, by which rule, at which JSON paths."""

    policy: str
    rule: str
    paths: list[str]


@dataclass(frozen=True)
class _Break:
    rule: str
    location: Location
    """Where the rule is broken: the emptied block, `tool_choice`, the thinking budget."""
    cause: tuple[Location, ...]
    """Where the change that broke it is, to name the policy that made it."""


def _empty_text_blocks(request: JSONObject) -> list[Location]:
    """Every text block holding "" (system or messages), and every message whose string
    content is "" (a text block in short) where the API needs content; a location is made
    only for those."""
    found: list[Location] = []
    containers: list[tuple[Location, Any]] = [(("system",), request.get("system"))]
    messages = request.get("messages")
    if isinstance(messages, list):
        for m, message in enumerate(messages):
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            if content == "" and not may_be_empty(messages, m):
                found.append(("messages", m, "content"))
            containers.append((("messages", m, "content"), content))
    for location, blocks in containers:
        if not isinstance(blocks, list):
            continue
        for index, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("text") == "" and block.get("type") == "text":
                found.append((*location, index))
    return found


def may_be_empty(messages: list[Any], index: int) -> bool:
    """The API's one exception to non-empty content: a final assistant message (a prefill)."""
    return index == len(messages) - 1 and messages[index].get("role") == "assistant"


def _emptied_text(location: Location) -> Location:
    """Where the emptied text is: a block's `text`, or a message's string `content`."""
    return location if location[-1] == "content" else (*location, "text")


def _tool_names(request: JSONObject) -> set[Any]:
    tools = request.get("tools")
    if not isinstance(tools, list):
        return set()
    return {tool.get("name") for tool in tools if isinstance(tool, dict)}


def _thinking_budget_broken(request: JSONObject) -> bool:
    thinking = request.get("thinking")
    if not isinstance(thinking, dict):
        return False
    budget = json_number(thinking.get("budget_tokens"))
    ceiling = json_number(request.get("max_tokens"))
    return budget is not None and ceiling is not None and budget >= ceiling


def _candidates(request: JSONObject) -> list[_Break]:
    """The rules `request` breaks, whoever broke them: a scan, no copy, no parse."""
    found = [
        _Break(RULE_EMPTY_TEXT, location, (_emptied_text(location),))
        for location in _empty_text_blocks(request)
    ]
    choice = request.get("tool_choice")
    if (
        isinstance(choice, dict)
        and choice.get("type") == "tool"
        and choice.get("name") not in _tool_names(request)
    ):
        found.append(_Break(RULE_TOOL_CHOICE, ("tool_choice",), (("tools",),)))
    if _thinking_budget_broken(request):
        found.append(
            _Break(
                RULE_THINKING_BUDGET,
                ("thinking", "budget_tokens"),
                (("max_tokens",), ("thinking", "budget_tokens")),
            )
        )
    return found


def _caused_by_policy(broken: _Break, original: JSONObject, request: JSONObject) -> bool:
    """Whether the original kept the rule, so a policy's change broke it."""
    if broken.rule == RULE_EMPTY_TEXT:
        return bool(resolve(original, _emptied_text(broken.location)) != "")
    if broken.rule == RULE_TOOL_CHOICE:
        return bool(request["tool_choice"].get("name") in _tool_names(original))
    return not _thinking_budget_broken(original)


def _fix(broken: _Break, request: JSONObject) -> bool:
    """Repair one break in place (emptied blocks go in `_drop_blocks`); False if none fits."""
    if broken.rule == RULE_TOOL_CHOICE:
        choice = request["tool_choice"]
        if _tool_names(request):
            request["tool_choice"] = {
                "type": "auto",
                **{k: v for k, v in choice.items() if k == "disable_parallel_tool_use"},
            }
        else:
            request.pop("tool_choice")
        return True
    ceiling = json_number(request["max_tokens"])
    if ceiling is None or ceiling - 1 < MIN_THINKING_BUDGET:
        # No valid budget fits under the cap; turning thinking off would
        # undo the client's choice, so the upstream judges the request.
        return False
    request["thinking"]["budget_tokens"] = int(ceiling) - 1
    return True


def _drop_blocks(request: JSONObject, emptied: list[tuple[Location, str]]) -> None:
    """Drop emptied text blocks, last first so earlier indices hold; refill an emptied message."""
    for location, policy in sorted(emptied, key=lambda item: item[0], reverse=True):
        container = resolve(request, location[:-1])
        if location[-1] == "content":
            container["content"] = [_removed_by(policy)]
            continue
        del container[location[-1]]
        if not container and location[0] == "messages":
            container.append(_removed_by(policy))
    if request.get("system") == []:
        request.pop("system")


def _removed_by(policy: str) -> JSONObject:
    return {"type": "text", "text": f"[content removed by policy {policy}]"}


async def before_sending(
    original: bytes, request: JSONObject, chain: PolicyChain, ctx: PolicyContext
) -> list[Repair]:
    """Make the structural repairs `request` (what the chain made) needs, and record them."""
    repairs = await structural(original, request, chain, ctx)
    if repairs:
        span = tracing.start_span("policy repair")
        try:
            for repair in repairs:
                record(repair, ctx, chain, span)
        finally:
            span.end()
    return repairs


async def structural(
    original: bytes, request: JSONObject, chain: PolicyChain, ctx: PolicyContext
) -> list[Repair]:
    """Make the structural repairs `request` needs, in place; record nothing."""
    candidates = _candidates(request)
    if not candidates:
        return []
    document = json.loads(original)
    broken = [b for b in candidates if _caused_by_policy(b, document, request)]
    if not broken:
        return []
    causes = list(dict.fromkeys(cause for b in broken for cause in b.cause))
    attribution = await chain.attribute_changes(document, causes, ctx.replay())
    repairs: list[Repair] = []
    emptied: list[tuple[Location, str]] = []
    for b in broken:
        paths = {format_path(cause) for cause in b.cause}
        policy = next(
            (label for label, changed in attribution.items() if paths & set(changed)),
            UNATTRIBUTED,
        )
        if b.rule == RULE_EMPTY_TEXT:
            emptied.append((b.location, policy))
        elif not _fix(b, request):
            continue
        repairs.append(Repair(policy, b.rule, [format_path(b.location)]))
    _drop_blocks(request, emptied)
    return repairs


def record(repair: Repair, ctx: PolicyContext, chain: PolicyChain, span: tracing.Span) -> None:
    """Make a repair visible: the metric, the span annotation, a WARNING, the call's actions.

    Paths only, never content; the metric counts per policy, so a policy that
    keeps breaking requests shows in CloudWatch by name.
    """
    metrics.count_by(names.METRIC_POLICY_REPAIRS, {names.DIMENSION_POLICY: repair.policy})
    span.annotate(names.ANNOTATION_POLICY_REPAIR, repair.policy)
    logger.warning(
        "policy repair: a policy's change broke a rule the upstream enforces; repaired",
        extra={
            "call_id": ctx.call_id,
            "repair_policy": repair.policy,
            "repair_rule": repair.rule,
            "repair_paths": repair.paths,
        },
    )
    policy = chain.policy(repair.policy)
    if policy is not None:
        ctx.record(policy, REPAIR, rule=repair.rule, paths=repair.paths)
    else:
        ctx.actions.append(
            PolicyAction(repair.policy, REPAIR, {"rule": repair.rule, "paths": repair.paths})
        )
