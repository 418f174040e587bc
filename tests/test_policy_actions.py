"""The audit trail's unit: what `PolicyContext.record` keeps, and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from gateway_policies import (
    ACTIONS,
    Policy,
    PolicyAction,
    PolicyContext,
    PolicyViolation,
    TextRewriter,
    ToolCallGate,
)
from gateway_policies.builtin.block_tool_calls import BlockToolCalls
from gateway_policies.builtin.cap_max_tokens import CapMaxTokens
from gateway_policies.builtin.inject_system_prompt import InjectSystemPrompt
from gateway_policies.builtin.redact_secrets import RedactSecrets
from gateway_policies.builtin.rewrite_model import RewriteModel
from gateway_policies.builtin.string_replace import StringReplace
from gateway_policies.builtin.strip_tools import StripTools
from gateway_policies.testing import (
    MODEL,
    run_request,
    run_response,
    run_stream,
    stream,
    text_block,
    tool_use_block,
)

pytestmark = pytest.mark.unit


class Gate(Policy):
    name = "gate"


def context(**extra: object) -> PolicyContext:
    return PolicyContext("messages", False, "call-1", **extra)  # type: ignore[arg-type]


def test_a_recorded_action_is_an_entry_with_its_details() -> None:
    ctx = context()
    ctx.record(Gate(), "block", tool="bash")
    assert [a.as_json() for a in ctx.actions] == [
        {"policy": "gate", "action": "block", "tool": "bash"}
    ]


def test_a_shadow_context_marks_every_action_it_records() -> None:
    ctx = context(shadow=True)
    ctx.record(Gate(), "redact", kind="email", count=2)
    assert ctx.actions[0].as_json() == {
        "policy": "gate",
        "action": "redact",
        "kind": "email",
        "count": 2,
        "shadow": True,
    }


def test_an_action_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy action 'blocked'"):
        context().record(Gate(), "blocked")
    assert "block" in ACTIONS
    assert "repair" in ACTIONS


def test_a_detail_may_not_hide_the_entrys_own_keys() -> None:
    with pytest.raises(ValueError, match="may not be named"):
        PolicyAction("gate", "block", {"policy": "other"})


def test_a_replay_keeps_who_is_calling_but_no_actions() -> None:
    ctx = context(caller="alice", caller_groups=("contractors",))
    ctx.record(Gate(), "cap", field="max_tokens")
    again = ctx.replay()
    assert (again.caller, again.caller_groups, again.actions) == ("alice", ("contractors",), [])


# ---------------------------------------------------------- what each built-in records


def message_json(text: str, content: list[dict[str, object]] | None = None) -> dict[str, object]:
    blocks = content if content is not None else [{"type": "text", "text": text}]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": blocks,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def tool_use(name: str, tool_input: dict[str, object], ident: str = "t1") -> dict[str, object]:
    return {"type": "tool_use", "id": ident, "name": name, "input": tool_input}


def entries(ctx: PolicyContext) -> list[dict[str, object]]:
    return [action.as_json() for action in ctx.actions]


def request(text: str = "hello", **extra: object) -> dict[str, object]:
    return {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
    } | extra


def test_redact_secrets_records_each_kind_with_its_count_and_never_the_text() -> None:
    ctx = context()
    secret = "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"
    run_request(
        RedactSecrets(),
        request(f"{secret} {secret} a@example.com", system=f"also {secret}"),
        ctx=ctx,
    )
    assert entries(ctx) == [
        {
            "policy": "redact_secrets",
            "action": "redact",
            "where": "request",
            "kind": "anthropic_api_key",
            "count": 3,
        },
        {
            "policy": "redact_secrets",
            "action": "redact",
            "where": "request",
            "kind": "email",
            "count": 1,
        },
    ]
    assert secret not in repr(entries(ctx))


def test_a_request_with_nothing_to_change_records_nothing() -> None:
    ctx = context()
    chain: list[Policy[Any]] = [
        RedactSecrets(),
        RewriteModel({"map": {"other": "x"}}),
        CapMaxTokens({"max": 100}),
        StripTools({"names": ["bash"]}),
        StringReplace({"replacements": [["absent", "x"]]}),
    ]
    run_request(chain, request(), ctx=ctx)
    assert ctx.actions == []


def test_request_policies_record_what_they_changed() -> None:
    ctx = context()
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("bash", "read")]
    chain: list[Policy[Any]] = [
        RewriteModel({"map": {MODEL: "claude-cheap"}}),
        CapMaxTokens({"max": 2000}),
        StripTools({"names": ["bash"]}),
        InjectSystemPrompt({"text": "Be careful."}),
        StringReplace({"replacements": [["secret-project", "[codename]"]]}),
    ]
    body = request(
        "secret-project, secret-project",
        max_tokens=8000,
        thinking={"type": "enabled", "budget_tokens": 4000},
        tools=tools,
    )
    run_request(chain, body, ctx=ctx)
    assert entries(ctx) == [
        {
            "policy": "rewrite_model",
            "action": "rewrite",
            "field": "model",
            "from": MODEL,
            "to": "claude-cheap",
        },
        {"policy": "cap_max_tokens", "action": "cap", "field": "max_tokens", "limit": 2000},
        {
            "policy": "cap_max_tokens",
            "action": "cap",
            "field": "thinking.budget_tokens",
            "limit": 1999,
        },
        {"policy": "strip_tools", "action": "strip", "tools": ["bash"]},
        {"policy": "inject_system_prompt", "action": "inject", "field": "system"},
        {"policy": "string_replace", "action": "rewrite", "where": "request", "count": 2},
    ]


def test_a_text_rewriter_counts_a_response_and_a_stream_once_it_ends() -> None:
    policy = StringReplace({"replacements": [["cat", "dog"]], "apply_to": "response"})
    ctx = context()
    run_response(policy, message_json("cat and cat"), ctx=ctx)
    assert entries(ctx) == [
        {"policy": "string_replace", "action": "rewrite", "where": "response", "count": 2}
    ]
    streamed = PolicyContext("messages", True, "call-1")
    run_stream(policy, stream(text_block(0, "a cat", ", a cat", " and a cat")), ctx=streamed)
    assert entries(streamed) == [
        {"policy": "string_replace", "action": "rewrite", "where": "stream", "count": 3}
    ]


class Shout(TextRewriter):
    """A custom rewriter: it records nothing itself."""

    name = "shout"

    def rewrite(self, text: str) -> str:
        return text.upper()


class NoBash(ToolCallGate):
    """A custom gate: it records nothing itself."""

    name = "no_bash"

    async def blocked(self, tool: str, tool_input: object, ctx: PolicyContext) -> str | None:
        return "no bash" if tool == "bash" else None


def test_custom_rewriters_and_gates_record_through_their_bases() -> None:
    ctx = context()
    run_request(Shout(), request("quiet"), ctx=ctx)
    assert entries(ctx) == [
        {"policy": "shout", "action": "rewrite", "where": "request", "count": 1}
    ]
    answer = message_json("", content=[tool_use("bash", {"c": "ls"}), tool_use("read", {}, "t2")])
    ctx = context()
    run_response(NoBash(), answer, ctx=ctx)
    assert entries(ctx) == [{"policy": "no_bash", "action": "block", "tool": "bash"}]
    streamed = PolicyContext("messages", True, "call-1")
    events = stream(tool_use_block(0, "bash", {"c": "ls"}), tool_use_block(1, "read", {}))
    run_stream(NoBash(), events, ctx=streamed)
    assert entries(streamed) == [{"policy": "no_bash", "action": "block", "tool": "bash"}]


def test_block_tool_calls_records_each_blocked_call() -> None:
    policy = BlockToolCalls({"rules": [{"tool": "^bash$"}]})
    streamed = PolicyContext("messages", True, "call-1")
    events = stream(tool_use_block(0, "bash", {"c": "rm"}), tool_use_block(1, "bash", {"c": "ls"}))
    run_stream(policy, events, ctx=streamed)
    assert (
        entries(streamed) == [{"policy": "block_tool_calls", "action": "block", "tool": "bash"}] * 2
    )


def test_a_refusal_names_the_policy_that_refused() -> None:
    with pytest.raises(PolicyViolation) as refused:
        run_request([RedactSecrets(), CapMaxTokens({"max": 10})], request(max_tokens="lots"))
    assert refused.value.policy == "cap_max_tokens"
