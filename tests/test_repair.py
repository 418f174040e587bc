"""The retry ladder's structural repairs and the policy repair hook, without a gateway."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from gateway_policies import (
    JSONObject,
    Policy,
    PolicyChain,
    PolicyContext,
    UpstreamErrorInfo,
    load_chain,
    turns,
)
from gateway_policies.base import HOOKS
from policy_gateway.fallback.ladder import policy_repair
from policy_gateway.fallback.prepared import PreparedRequest
from policy_gateway.fallback.repair import before_sending
from policy_gateway.observability import tracing
from policy_gateway.routes.body import dump_json
from policy_gateway.upstream.errors import UpstreamStatusError

from .support.fake_upstream import MODEL
from .support.loop import finishing_order

pytestmark = pytest.mark.unit


class DropBash(Policy):
    """Removes the `bash` tool and leaves `tool_choice` alone: a custom policy's oversight."""

    name = "drop_bash"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["tools"] = [t for t in request.get("tools", []) if t.get("name") != "bash"]


class TightCap(Policy):
    """Caps `max_tokens` without looking at the thinking budget."""

    name = "tight_cap"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["max_tokens"] = min(request["max_tokens"], 4000)


class Shout(Policy):
    """Changes text, but never empties it: a policy the repairs must not blame."""

    name = "shout"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        for message in request["messages"]:
            for block in message["content"]:
                if block.get("text"):
                    block["text"] = block["text"].upper()


class Empty(Policy):
    name = "empty"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        for message in request["messages"]:
            for block in message["content"]:
                if block.get("text") == "drop me":
                    block["text"] = ""


class EmptyString(Policy):
    """Empties a message's string content, as a replacement of its whole text would."""

    name = "empty_string"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        for message in request["messages"]:
            if message["content"] == "drop me":
                message["content"] = ""


def context() -> PolicyContext:
    return PolicyContext(endpoint="messages", stream=False, call_id="call-1")


def prepare(chain: PolicyChain, original: JSONObject) -> tuple[JSONObject, PolicyContext, Any]:
    """The chain's request, then the repairs before sending: (request, ctx, repairs)."""
    ctx = context()
    request = copy.deepcopy(original)

    async def run() -> Any:
        await chain.apply_request(request, ctx)
        return await before_sending(json.dumps(original).encode(), request, chain, ctx)

    return request, ctx, asyncio.run(run())


def user(*texts: str) -> list[JSONObject]:
    return [{"role": "user", "content": [{"type": "text", "text": t} for t in texts]}]


def test_the_emptying_policy_is_named_among_several() -> None:
    chain = PolicyChain([Empty(), Shout()])
    original = {"model": MODEL, "max_tokens": 64, "messages": user("keep", "drop me")}
    request, ctx, repairs = prepare(chain, original)
    assert request["messages"] == user("KEEP")
    assert [(r.policy, r.rule, r.paths) for r in repairs] == [
        ("empty", "empty_text_block", ["$.messages[0].content[1]"])
    ]
    assert [a.as_json() for a in ctx.actions] == [
        {
            "policy": "empty",
            "action": "repair",
            "rule": "empty_text_block",
            "count": 1,
            "paths": ["$.messages[0].content[1]"],
        }
    ]


def test_string_content_a_policy_emptied_becomes_a_block_naming_the_policy() -> None:
    chain = PolicyChain([EmptyString()])
    messages = [
        {"role": "user", "content": "drop me"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "keep"},
    ]
    original = {"model": MODEL, "max_tokens": 64, "messages": messages}
    request, _, repairs = prepare(chain, original)
    assert request["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "[content removed by policy empty_string]"}],
        },
        *messages[1:],
    ]
    assert [(r.policy, r.rule, r.paths) for r in repairs] == [
        ("empty_string", "empty_text_block", ["$.messages[0].content"])
    ]


def test_empty_string_content_from_the_client_or_in_a_final_prefill_is_left_alone() -> None:
    chain = PolicyChain([EmptyString()])
    messages = [{"role": "user", "content": ""}, {"role": "assistant", "content": "drop me"}]
    original = {"model": MODEL, "max_tokens": 64, "messages": messages}
    request, _, repairs = prepare(chain, original)
    assert repairs == []
    assert request["messages"] == [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
    ]


def test_a_tool_choice_naming_a_removed_tool_becomes_auto() -> None:
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("bash", "search")]
    original = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": user("hi"),
        "tools": tools,
        "tool_choice": {"type": "tool", "name": "bash", "disable_parallel_tool_use": True},
    }
    request, _ctx, repairs = prepare(PolicyChain([DropBash()]), original)
    assert request["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert [(r.policy, r.rule, r.paths) for r in repairs] == [
        ("drop_bash", "tool_choice_names_removed_tool", ["$.tool_choice"])
    ]


def test_a_tool_choice_the_client_got_wrong_is_left_for_the_upstream() -> None:
    original = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": user("hi"),
        "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "no_such_tool"},
    }
    request, ctx, repairs = prepare(PolicyChain([DropBash()]), original)
    assert request["tool_choice"] == {"type": "tool", "name": "no_such_tool"}
    assert (repairs, ctx.actions) == ([], [])


def test_a_thinking_budget_a_cap_pushed_over_max_tokens_is_lowered() -> None:
    original = {
        "model": MODEL,
        "max_tokens": 16000,
        "thinking": {"type": "enabled", "budget_tokens": 8000},
        "messages": user("think"),
    }
    request, _, repairs = prepare(PolicyChain([TightCap()]), original)
    assert (request["max_tokens"], request["thinking"]["budget_tokens"]) == (4000, 3999)
    assert [(r.policy, r.rule) for r in repairs] == [
        ("tight_cap", "thinking_budget_not_below_max_tokens")
    ]


def test_the_clients_own_broken_thinking_budget_is_not_repaired() -> None:
    original = {
        "model": MODEL,
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 8000},
        "messages": user("think"),
    }
    request, _, repairs = prepare(PolicyChain([TightCap()]), original)
    assert request["thinking"]["budget_tokens"] == 8000
    assert repairs == []


def test_a_request_without_a_broken_rule_is_left_as_it_is() -> None:
    original = {"model": MODEL, "max_tokens": 64, "messages": user("keep")}
    request, ctx, repairs = prepare(PolicyChain([Shout()]), original)
    assert request["messages"] == user("KEEP")
    assert (repairs, ctx.actions) == ([], [])


def test_the_repair_hook_is_part_of_the_policy_api() -> None:
    assert "on_upstream_error" in HOOKS
    chain = load_chain({"policies": [{"policy": "noop"}]})
    assert not chain.offers_repairs


def rewrite(targets: Any) -> PolicyChain:
    return load_chain(
        {"policies": [{"policy": "rewrite_model", "options": {"map": {MODEL: targets}}}]}
    )


NOT_FOUND = UpstreamErrorInfo(404, "not_found_error", "model: x")


def test_rewrite_model_keeps_the_map_form() -> None:
    chain = rewrite("claude-other")
    ctx = context()
    request: JSONObject = {"model": MODEL}
    asyncio.run(chain.apply_request(request, ctx))
    assert request == {"model": "claude-other"}
    assert asyncio.run(chain.repair(request, NOT_FOUND, ctx)) == []


def test_rewrite_model_repairs_only_its_own_choice_and_only_on_a_404() -> None:
    chain = rewrite(["claude-a", "claude-b", "claude-c"])
    ctx = context()
    request: JSONObject = {"model": MODEL}
    asyncio.run(chain.apply_request(request, ctx))
    assert request == {"model": "claude-a"}
    bad_request = UpstreamErrorInfo(400, "invalid_request_error", "x")
    assert asyncio.run(chain.repair(request, bad_request, ctx)) == []
    assert [p.label for p in asyncio.run(chain.repair(request, NOT_FOUND, ctx))] == [
        "rewrite_model"
    ]
    assert request == {"model": "claude-b"}
    # The client asked for a target by name: that is the client's choice, not the policy's.
    ctx = context()
    direct: JSONObject = {"model": "claude-a"}
    asyncio.run(chain.apply_request(direct, ctx))
    assert asyncio.run(chain.repair(direct, NOT_FOUND, ctx)) == []
    assert direct == {"model": "claude-a"}


class BrokenRepair(Policy):
    name = "broken_repair"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["model"] = "claude-retired-1"

    async def on_upstream_error(
        self, request: JSONObject, error: UpstreamErrorInfo, ctx: PolicyContext
    ) -> bool:
        request["model"] = "half-changed"
        raise RuntimeError("a bug in the hook")


def test_a_repair_hook_that_fails_repairs_nothing() -> None:
    original = json.dumps({"model": MODEL, "max_tokens": 64, "messages": user("hi")}).encode()
    chain = PolicyChain([BrokenRepair()])
    ctx = context()
    request = json.loads(original)
    asyncio.run(chain.apply_request(request, ctx))
    prepared = PreparedRequest(original, dump_json(request), request, chain, ctx, dump_json)
    body = b'{"type":"error","error":{"type":"not_found_error","message":"model: x"}}'
    error = UpstreamStatusError(404, body, [], tracing.start_span("test"), None)
    assert asyncio.run(policy_repair(error, prepared)) is None
    assert prepared.modified == {**request, "model": "claude-retired-1"}
    assert json.loads(prepared.sent)["model"] == "claude-retired-1"


def test_a_long_repair_lets_another_call_on_its_loop_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: request hooks share one worker loop in `serve`; a repair of thousands of
    blocks hands it back between turns (a turn of no time here, so no clock is read for it)."""
    monkeypatch.setattr(turns, "TURN_SECONDS", 0.0)
    chain = PolicyChain([Empty(), Shout()])
    original = {"model": MODEL, "max_tokens": 64, "messages": user("keep", *["drop me"] * 5000)}

    async def large() -> None:
        request, ctx = copy.deepcopy(original), context()
        await chain.apply_request(request, ctx)
        (repair,) = await before_sending(json.dumps(original).encode(), request, chain, ctx)
        assert (repair.policy, repair.count, len(ctx.actions)) == ("empty", 5000, 1)

    assert finishing_order(large) == ["small", "large"]
