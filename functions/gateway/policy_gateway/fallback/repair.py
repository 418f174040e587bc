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
the same way (repair_record.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from gateway_policies import JSONObject, PolicyChain, PolicyContext
from gateway_policies.numbers import json_number
from gateway_policies.runtime.diff import Location, resolve
from gateway_policies.turns import in_turns

from ..observability import tracing
from .repair_record import Repair, record

RULE_EMPTY_TEXT = "empty_text_block"
RULE_TOOL_CHOICE = "tool_choice_names_removed_tool"
RULE_THINKING_BUDGET = "thinking_budget_not_below_max_tokens"

MIN_THINKING_BUDGET = 1024
UNATTRIBUTED = "<chain>"
"""The policy named when replaying the chain cannot tell which one broke the rule."""


@dataclass(frozen=True)
class _Break:
    """A broken rule other than an emptied text (those are many, and kept as locations)."""

    rule: str
    location: Location
    """Where the rule is broken: `tool_choice`, the thinking budget."""
    cause: tuple[Location, ...]
    """Where the change that broke it is, to name the policy that made it."""


Emptied = tuple[Location, list[Any]]
"""A list and the indices of its empty text blocks, or a message and ["content"]."""


def _contents(request: JSONObject) -> Iterator[tuple[Location, Any]]:
    """Where text must not be empty: the system blocks, and each message's content but a
    final assistant message's (a prefill). A `system` string is no message's content: it
    is left as it is."""
    system = request.get("system")
    if isinstance(system, list):
        yield ("system",), system
    messages = request.get("messages")
    if isinstance(messages, list):
        for m, message in enumerate(messages):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list) or (content == "" and not may_be_empty(messages, m)):
                yield ("messages", m, "content"), content


async def _empty_texts(request: JSONObject) -> list[Emptied]:
    """Every text block holding "" (system or messages), and every message's string content
    that is "" where the API needs content, in the request's order, a list at a time."""
    found: list[Emptied] = []
    async for batch in in_turns(_contents(request)):
        for where, content in batch:
            if content == "":
                found.append((where[:-1], ["content"]))
                continue
            if not isinstance(content, list):
                continue
            indices = [
                index
                for index, block in enumerate(content)
                if type(block) is dict and block.get("text") == "" and block.get("type") == "text"
            ]
            if indices:
                found.append((where, indices))
    return found


def _emptied_by_chain(original: JSONObject, emptied: Emptied) -> Emptied:
    """Of `emptied`, what the original had text in: a policy's doing, not the client's."""
    where, keys = emptied
    holder = resolve(original, where)
    if keys == ["content"]:
        held = isinstance(holder, dict) and holder.get("content") == ""
        return where, [] if held else keys
    if not isinstance(holder, list):
        return emptied
    texts = [block.get("text") if isinstance(block, dict) else None for block in holder]
    return where, [index for index in keys if index >= len(texts) or texts[index] != ""]


def _emptied_texts(emptied: Emptied) -> list[Location]:
    """Where the emptied texts are: each block's `text`, or the message's `content`."""
    where, keys = emptied
    if keys == ["content"]:
        return [(*where, "content")]
    return [(*where, index, "text") for index in keys]


def may_be_empty(messages: list[Any], index: int) -> bool:
    """The API's one exception to non-empty content: a final assistant message (a prefill)."""
    return index == len(messages) - 1 and messages[index].get("role") == "assistant"


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


def _other_breaks(request: JSONObject) -> list[_Break]:
    """The rules but the emptied text's that `request` breaks, whoever broke them."""
    found: list[_Break] = []
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


def _drop_blocks(request: JSONObject, dropped: list[tuple[Location, dict[Any, str]]]) -> None:
    """Drop emptied text blocks, each list rebuilt once; refill a message left empty, or whose
    string content was emptied, with a block naming the policy."""
    for where, policies in dropped:
        holder = resolve(request, where)
        if "content" in policies:
            holder["content"] = [_removed_by(policies["content"])]
            continue
        kept = [block for index, block in enumerate(holder) if index not in policies]
        if not kept and where[0] == "messages":
            kept = [_removed_by(policies[min(policies)])]
        holder[:] = kept
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
            record(repairs, ctx, chain, span)
        finally:
            span.end()
    return repairs


async def structural(
    original: bytes, request: JSONObject, chain: PolicyChain, ctx: PolicyContext
) -> list[Repair]:
    """Make the structural repairs `request` needs, in place; record nothing.

    A scan of the request finds the candidates (no copy, no parse); only when
    there is one is the original parsed to compare, and the chain replayed to
    name the policy. Each step is one pass over the candidates, and each list
    that loses blocks is rebuilt once: a body of 200,000 emptied blocks costs
    about what reading it costs, and is recorded as one repair.
    """
    emptied = await _empty_texts(request)
    others = _other_breaks(request)
    if not emptied and not others:
        return []
    document = json.loads(original)
    emptied = [kept for kept in (_emptied_by_chain(document, e) for e in emptied) if kept[1]]
    others = [b for b in others if _caused_by_policy(b, document, request)]
    if not emptied and not others:
        return []
    texts = [text for e in emptied for text in _emptied_texts(e)]
    causes = [*texts, *dict.fromkeys(cause for b in others for cause in b.cause)]
    first = await chain.changed_first_by(document, causes, ctx.replay())
    repaired: dict[tuple[str, str], list[Location]] = {}
    dropped: list[tuple[Location, dict[Any, str]]] = []
    owners = iter(first)
    for where, keys in emptied:
        policies = [owner or UNATTRIBUTED for owner in islice(owners, len(keys))]
        dropped.append((where, dict(zip(keys, policies, strict=True))))
        for policy in dict.fromkeys(policies):
            repaired.setdefault((policy, RULE_EMPTY_TEXT), []).extend(
                (*where, key) for key, owner in zip(keys, policies, strict=True) if owner == policy
            )
    named = dict(zip(causes[len(texts) :], owners, strict=True))
    order = {label: position for position, label in enumerate(chain.names)}
    for b in others:
        by = [owner for owner in map(named.__getitem__, b.cause) if owner]
        policy = min(by, key=order.__getitem__, default=UNATTRIBUTED)
        if _fix(b, request):
            repaired.setdefault((policy, b.rule), []).append(b.location)
    _drop_blocks(request, dropped)
    return [Repair.at(policy, rule, locations) for (policy, rule), locations in repaired.items()]
