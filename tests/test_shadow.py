"""Shadow mode: a chain entry with `"mode": "shadow"` runs on copies and is only recorded.

Through the real gateway (SDK → gateway → fake upstream): a shadow policy's
request changes never reach the upstream, its response and stream changes
never reach the client, its refusals refuse nothing, it neither causes nor
prevents a fallback, and a shadow policy that fails changes nothing. What it
would have done is on the call's audit trail: the call line's `policy_actions`
(marked `"shadow": true`) and PolicyActions with `mode` = shadow.
The chain's own rules (copies, bounds, cost) are in test_shadow_chain.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import pytest
from gateway_policies import PolicyConfigError, load_chain
from policy_gateway import names

from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import ask, ask_text, both, sdk
from .support.tool_calls import BASH_RM, TOOLS, kinds, tool_reply


def document(*entries: dict[str, Any]) -> str:
    return json.dumps({"policies": list(entries)})


def shadow(policy: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"policy": policy, "options": options or {}, "mode": "shadow"}


def recorded(stdout: GatewayStdout) -> list[dict[str, Any]]:
    """The one call's audit trail, as its call line writes it."""
    (line,) = stdout.call_lines(1)
    actions: list[dict[str, Any]] = line["policy_actions"]
    return actions


def blocks(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The block actions, without the details that are block_tool_calls' own."""
    keys = ("policy", "action", "tool", "shadow")
    return [
        {key: action[key] for key in keys if key in action}
        for action in actions
        if action["action"] == "block"
    ]


@both
def test_a_shadow_block_lets_the_tool_call_through_and_records_the_would_be_block(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    block = shadow("block_tool_calls", {"rules": [BASH_RM]})
    url = make_gateway(policy_config=document(block))
    upstream.script(tool_reply(streaming, ("bash", {"command": "rm -rf /"}), text="Cleaning."))
    reply = ask(sdk(url), streaming, tools=TOOLS)
    assert kinds(reply) == ["text", "tool_use"]
    assert reply.content[1].input == {"command": "rm -rf /"}  # type: ignore[union-attr]
    assert reply.stop_reason == "tool_use"
    wanted = {"policy": "block_tool_calls", "action": "block", "tool": "bash", "shadow": True}
    assert blocks(recorded(gateway_stdout)) == [wanted]
    by = {"policy": "block_tool_calls", "action": "block"}
    assert gateway_stdout.counted(names.METRIC_POLICY_ACTIONS, **by, mode="shadow") == 1


def test_the_chain_load_names_the_shadow_policies_apart_from_the_enforced_ones(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    """What runs in shadow is on the load line too, not only what decides."""
    block = shadow("block_tool_calls", {"rules": [BASH_RM]})
    url = make_gateway(policy_config=document({"policy": "redact_secrets"}, block))
    ask(sdk(url), False)
    gateway_stdout.call_lines(1)
    (loaded,) = [
        line
        for line in gateway_stdout.lines()
        if line.get("message") == names.LOG_POLICY_CHAIN_LOADED
    ]
    assert (loaded["policies"], loaded["shadow"]) == (["redact_secrets"], ["block_tool_calls"])


@both
def test_the_same_block_enforced_blocks(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    """The control: the shadow test above passes because of the mode, not the rule."""
    block = shadow("block_tool_calls", {"rules": [BASH_RM]})
    block["mode"] = "enforce"
    url = make_gateway(policy_config=document(block))
    upstream.script(tool_reply(streaming, ("bash", {"command": "rm -rf /"}), text="Cleaning."))
    assert kinds(ask(sdk(url), streaming, tools=TOOLS)) == ["text", "text"]
    wanted = {"policy": "block_tool_calls", "action": "block", "tool": "bash"}
    assert blocks(recorded(gateway_stdout)) == [wanted]
    by = {"policy": "block_tool_calls", "action": "block"}
    assert gateway_stdout.counted(names.METRIC_POLICY_ACTIONS, **by) == 1


@both
def test_a_shadow_refusal_refuses_nothing_and_is_recorded(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    url = make_gateway(policy_config=document(shadow("tests.support.policies:RefuseAll")))
    assert ask(sdk(url), streaming).content[0].text.replace(" ", "") == "echo:hello"  # type: ignore[union-attr]
    refusals = {"policy": "RefuseAll", "action": "refuse", "shadow": True}
    assert [{key: entry[key] for key in refusals} for entry in recorded(gateway_stdout)] == [
        refusals
    ] * (1 if streaming else 2)


@both
def test_a_shadow_request_rewrite_never_reaches_the_upstream_nor_falls_back(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    set_flag("true")
    rewrite = shadow("rewrite_model", {"map": {MODEL: "claude-retired"}})
    url = make_gateway(policy_config=document(rewrite))
    assert ask_text(sdk(url), streaming).startswith("echo:")
    assert upstream.requests[-1].json["model"] == MODEL
    upstream.script(Reply.error(404, "not_found_error"))
    with pytest.raises(anthropic.NotFoundError):
        ask_text(sdk(url), streaming)
    assert [r.json["model"] for r in upstream.requests] == [MODEL, MODEL]
    gateway_stdout.until(lambda text: text.count('"call finished"') >= 2)
    finished = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    assert [line["fallback"] for line in finished] == ["none", "none"]


def test_a_shadow_policy_never_prevents_a_fallback_nor_is_attributed_one(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
) -> None:
    set_flag("true")
    enforced = {"policy": "rewrite_model", "options": {"map": {MODEL: "claude-retired"}}}
    guarded = shadow("tests.support.policies:GuardedRewrite")
    url = make_gateway(policy_config=document(enforced, guarded))
    upstream.script(Reply.error(404, "not_found_error"))
    assert ask_text(sdk(url)).startswith("echo:")
    assert [r.json["model"] for r in upstream.requests] == ["claude-retired", MODEL]
    text = gateway_stdout.until(lambda text: "passthrough fallback:" in text)
    (warning,) = [line for line in json_of(text) if "changed_by_policy" in line]
    assert warning["changed_by_policy"] == {"rewrite_model": ["$.model"]}


def json_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@both
def test_a_failing_shadow_policy_does_not_change_the_answer(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    plain = ask(sdk(make_gateway()), streaming)
    url = make_gateway(policy_config=document(shadow("tests.support.policies:Explode")))
    answered = ask(sdk(url), streaming)
    assert answered.content == plain.content
    assert answered.stop_reason == plain.stop_reason
    assert [r.json for r in upstream.requests[-2:]] == [upstream.requests[0].json] * 2
    text = gateway_stdout.until(lambda text: text.count("shadow policy failed") >= 2)
    failures = [line for line in json_of(text) if line.get("message", "").startswith("shadow")]
    assert {line["hook"] for line in failures} == {
        "on_request",
        "on_stream_event" if streaming else "on_response",
    }
    assert {line["error_type"] for line in failures} == {"RuntimeError"}


def test_a_shadow_mode_other_than_enforce_or_shadow_is_refused() -> None:
    for mode in ["audit", "", None, ["shadow"]]:
        with pytest.raises(PolicyConfigError, match=r"policies\[0\]\.mode must be"):
            load_chain({"policies": [{"policy": "noop", "mode": mode}]})
    chain = load_chain(
        {"policies": [{"policy": "noop", "mode": "enforce"}, {"policy": "noop", "mode": "shadow"}]}
    )
    assert len(chain.policies) == 1
    assert len(chain.shadow.policies) == 1
