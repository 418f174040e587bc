"""Unit tests of the built-in policies, through gateway_policies.testing (no gateway)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from gateway_policies import BUILTIN_POLICIES, PolicyConfigError, load_chain
from gateway_policies.builtin.block_tool_calls import BlockToolCalls
from gateway_policies.builtin.cap_max_tokens import CapMaxTokens
from gateway_policies.builtin.redact_secrets import RedactSecrets
from gateway_policies.builtin.rewrite_model import RewriteModel
from gateway_policies.builtin.strip_tools import StripTools
from gateway_policies.testing import (
    MODEL,
    assemble,
    message_delta,
    message_start,
    message_stop,
    ping,
    run_request,
    run_response,
    run_stream,
    stream,
    text_block,
    tool_use_block,
)

from .support.client import user_request as request
from .support.fake_upstream import message

pytestmark = pytest.mark.unit

SECRETS = {
    "anthropic_api_key": "sk-ant-api03-AbCdEf0123456789_xyzXYZ-abcdefgh",
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
    "email": "jane.doe@example.co.uk",
}
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc+/=\n-----END RSA PRIVATE KEY-----"
THINKING = {
    "type": "thinking",
    "thinking": "the key is sk-ant-api03-secretsecret",
    "signature": "s",
}


# ------------------------------------------------------------------ config


@pytest.mark.parametrize(
    ("name", "options", "complaint"),
    [
        ("redact_secrets", {"kinds": ["passwords"]}, "kinds"),
        ("redact_secrets", {"unknown": 1}, "unknown"),
        ("rewrite_model", {}, "map"),
        ("rewrite_model", {"map": {}}, "map"),
        ("cap_max_tokens", {"max": 0}, "max"),
        ("strip_tools", {"names": []}, "names"),
        ("block_tool_calls", {"rules": [{}]}, "'tool', 'input' or both"),
        ("block_tool_calls", {"rules": [{"tool": "("}]}, "not a valid regular expression"),
        ("block_tool_calls", {"rules": [{"tool": "x", "name": "y"}]}, "name"),
        ("tool_call_judge", {"threshold": 2}, "threshold"),
        ("tool_call_judge", {"timeout": 0}, "timeout"),
        ("rules_judge", {}, "needs `rules`, a `preset`, or both"),
        ("rules_judge", {"preset": "package_manager"}, "needs `use`"),
        ("rules_judge", {"preset": "nope"}, "preset"),
        ("rules_judge", {"rules": "x", "use": "uv"}, "package_manager preset only"),
        ("rules_judge", {"rules": "x", "provider": "openai"}, "unknown judge provider"),
        ("rules_judge", {"rules": "x", "when": {"text": "("}}, "not a valid regular expression"),
        ("rules_judge", {"rules": "x", "max_concurrent": 0}, "max_concurrent"),
        ("rules_judge", {"rules": "x", "on_error": "maybe"}, "on_error"),
    ],
)
def test_bad_options_are_a_clear_config_error(
    name: str, options: dict[str, Any], complaint: str
) -> None:
    config = {"policies": [{"policy": name, "options": options}]}
    with pytest.raises(PolicyConfigError, match=name) as caught:
        load_chain(config)
    assert complaint in str(caught.value)


def test_every_builtin_loads_and_declares_bypassability() -> None:
    options: dict[str, dict[str, Any]] = {
        "string_replace": {"replacements": [["a", "b"]]},
        "inject_system_prompt": {"text": "be safe"},
        "rewrite_model": {"map": {"a": "b"}},
        "cap_max_tokens": {"max": 10},
        "strip_tools": {"names": ["bash"]},
        "block_tool_calls": {"rules": [{"tool": "bash"}]},
        "flow_guard": {"sinks": [{"tool": "bash"}]},
        "rules_judge": {"preset": "dangerous_commands"},
    }
    chain = load_chain(
        {"policies": [{"policy": n, "options": options.get(n, {})} for n in BUILTIN_POLICIES]}
    )
    assert chain.names == list(BUILTIN_POLICIES)
    assert sorted(chain.non_bypassable) == ["redact_secrets", "strip_tools"]


def test_the_judge_policy_does_not_import_anthropic_when_loaded() -> None:
    code = (
        "import sys; from gateway_policies import load_chain; "
        "load_chain({'policies': [{'policy': 'tool_call_judge'}, {'policy': 'block_tool_calls',"
        " 'options': {'rules': [{'tool': 'x'}]}}]}); print('anthropic' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# ---------------------------------------------------------- redact_secrets


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_redacts_each_kind_in_string_content(kind: str) -> None:
    out = run_request(RedactSecrets(), request(f"use {SECRETS[kind]} now"))
    assert out["messages"][0]["content"] == f"use [REDACTED:{kind}] now"


def test_redacts_labelled_aws_secret_key_pem_and_bearer_keeping_the_labels() -> None:
    text = (
        f"aws_secret_access_key = {AWS_SECRET}\n"
        f'"SecretAccessKey": "{AWS_SECRET}"\n'
        "curl -H 'Authorization: Bearer abc123.def456-ghi' url\n"
        f"key:\n{PEM}\nthanks"
    )
    out = run_request(RedactSecrets(), request([{"type": "text", "text": text}]))
    assert out["messages"][0]["content"][0]["text"] == (
        "aws_secret_access_key = [REDACTED:aws_secret_access_key]\n"
        '"SecretAccessKey": "[REDACTED:aws_secret_access_key]"\n'
        "curl -H 'Authorization: Bearer [REDACTED:bearer_token]' url\n"
        "key:\n[REDACTED:private_key]\nthanks"
    )


def test_leaves_lookalikes_alone() -> None:
    text = f"Bearer authentication is fine; an unlabelled {AWS_SECRET}; AKIA-short; a@b"
    assert run_request(RedactSecrets(), request(text)) == request(text)


def test_a_truncated_private_key_is_still_redacted() -> None:
    out = run_request(RedactSecrets(), request("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg"))
    assert out["messages"][0]["content"] == "[REDACTED:private_key]"


def test_redacts_system_tool_results_and_never_thinking() -> None:
    key = SECRETS["anthropic_api_key"]
    original: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 10,
        "system": [{"type": "text", "text": f"ops key {key}"}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    THINKING,
                    {"type": "redacted_thinking", "data": f"opaque {key}"},
                    {"type": "tool_use", "id": "t1", "name": "env", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": f"KEY={key}"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": [{"type": "text", "text": f"mail {SECRETS['email']}"}],
                    },
                ],
            },
        ],
    }
    out = run_request(RedactSecrets(), original)
    assert out["system"][0]["text"] == "ops key [REDACTED:anthropic_api_key]"
    assert out["messages"][1]["content"][:2] == original["messages"][1]["content"][:2]
    results = out["messages"][2]["content"]
    assert results[0]["content"] == "KEY=[REDACTED:anthropic_api_key]"
    assert results[1]["content"][0]["text"] == "mail [REDACTED:email]"


def test_redaction_limited_to_chosen_kinds() -> None:
    text = f"{SECRETS['email']} {SECRETS['aws_access_key_id']}"
    out = run_request(RedactSecrets({"kinds": ["email"]}), request(text))
    assert out["messages"][0]["content"] == f"[REDACTED:email] {SECRETS['aws_access_key_id']}"


def test_redaction_applies_to_streaming_requests_and_leaves_the_stream_alone() -> None:
    out = run_request(RedactSecrets(), request(SECRETS["email"], stream=True))
    assert out["messages"][0]["content"] == "[REDACTED:email]"
    events = stream(text_block(0, "mail me at ", SECRETS["email"]))
    assert run_stream(RedactSecrets(), events) == events


# ------------------------------------------- rewrite_model, cap_max_tokens


@pytest.mark.parametrize("streaming", [False, True])
def test_rewrite_model_maps_only_listed_models(streaming: bool) -> None:
    policy = RewriteModel({"map": {MODEL: "claude-other"}})
    out = run_request(policy, request([{"type": "text", "text": "hi"}], stream=streaming))
    assert out["model"] == "claude-other"
    untouched = request("hi", stream=streaming) | {"model": "claude-x"}
    assert run_request(policy, untouched) == untouched
    assert policy.bypassable


def test_cap_max_tokens_lowers_only_larger_values_and_keeps_thinking_valid() -> None:
    policy = CapMaxTokens({"max": 4096})
    assert run_request(policy, request("hi"))["max_tokens"] == 100
    big = request([{"type": "text", "text": "hi"}], stream=True) | {"max_tokens": 32000}
    big["thinking"] = {"type": "enabled", "budget_tokens": 16000}
    out = run_request(policy, big)
    assert out["max_tokens"] == 4096
    assert out["thinking"]["budget_tokens"] == 4095
    count = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    assert run_request(policy, count, endpoint="count_tokens") == count


# ------------------------------------------------------------ strip_tools


def tools(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "description": n, "input_schema": {"type": "object"}} for n in names]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, {"type": "auto"}),
        ({"type": "any"}, {"type": "any"}),
        ({"type": "tool", "name": "read"}, {"type": "tool", "name": "read"}),
        (
            {"type": "tool", "name": "bash", "disable_parallel_tool_use": True},
            {"type": "auto", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_strip_tools_keeps_tool_choice_consistent(
    choice: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = request("hi", tools=tools("bash", "read"), tool_choice=choice)
    out = run_request(StripTools({"names": ["bash"]}), body)
    assert [t["name"] for t in out["tools"]] == ["read"]
    assert out["tool_choice"] == expected


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "bash"}])
def test_strip_tools_removing_every_tool_drops_tools_and_choice(choice: dict[str, Any]) -> None:
    body = request([{"type": "text", "text": "hi"}], tools=tools("bash"), tool_choice=choice)
    out = run_request(StripTools({"names": ["bash", "other"]}), body)
    assert "tools" not in out
    assert "tool_choice" not in out
    assert run_request(StripTools({"names": ["x"]}), body) == body


# ------------------------------------------------------- block_tool_calls

BLOCK_BASH_RM = BlockToolCalls({"rules": [{"tool": "^bash$", "input": r"rm\s+-rf"}]})


def tool_use(name: str, tool_input: dict[str, Any], ident: str = "t1") -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": name, "input": tool_input}


@pytest.mark.parametrize(
    ("rule", "name", "tool_input", "blocked"),
    [
        ({"tool": "bash"}, "run_bash_cmd", {}, True),  # searched, not anchored
        ({"tool": "^bash$"}, "run_bash_cmd", {}, False),
        ({"input": "/etc/passwd"}, "read", {"path": "/etc/passwd"}, True),
        ({"tool": "bash", "input": "rm"}, "bash", {"command": "ls"}, False),
        ({"tool": "bash", "input": "rm"}, "read", {"path": "rm"}, False),
        ({"tool": "bash", "input": '"command": "rm'}, "bash", {"command": "rm x"}, True),
    ],
)
def test_rule_matching(
    rule: dict[str, str], name: str, tool_input: dict[str, Any], blocked: bool
) -> None:
    policy = BlockToolCalls({"rules": [{"tool": "nothing-matches"}, rule]})
    response = message("", content=[tool_use(name, tool_input)]) | {"stop_reason": "tool_use"}
    out = run_response(policy, response)
    assert (out["content"][0]["type"] == "text") is blocked
    if blocked:
        assert f"tool {name!r}" in out["content"][0]["text"]
        assert "rule 2" in out["content"][0]["text"]


def test_non_streaming_block_replaces_in_place_and_fixes_stop_reason() -> None:
    content = [
        {"type": "text", "text": "let me clean up"},
        tool_use("bash", {"command": "rm -rf /"}, "t1"),
    ]
    out = run_response(BLOCK_BASH_RM, message("", content=content) | {"stop_reason": "tool_use"})
    assert out["content"][0] == content[0]
    assert out["content"][1]["type"] == "text"
    assert "block_tool_calls blocked a call to tool 'bash'" in out["content"][1]["text"]
    assert out["stop_reason"] == "end_turn"


def test_non_streaming_keeps_stop_reason_when_a_call_survives() -> None:
    content = [tool_use("bash", {"command": "rm -rf /"}, "t1"), tool_use("bash", {"command": "ls"})]
    out = run_response(BLOCK_BASH_RM, message("", content=content) | {"stop_reason": "tool_use"})
    assert [b["type"] for b in out["content"]] == ["text", "tool_use"]
    assert out["stop_reason"] == "tool_use"
    text_only = message("rm -rf / is a bad idea")
    assert run_response(BLOCK_BASH_RM, text_only) == text_only


def test_streaming_block_emits_a_text_block_at_the_same_index() -> None:
    events = stream(
        text_block(0, "cleaning ", "up"),
        tool_use_block(1, "bash", {"command": "rm -rf /tmp/x"}),
        stop_reason="tool_use",
    )
    out = run_stream(BLOCK_BASH_RM, events)
    final = assemble(out)
    assert [b["type"] for b in final["content"]] == ["text", "text"]
    assert final["content"][0]["text"] == "cleaning up"
    assert "blocked a call to tool 'bash'" in final["content"][1]["text"]
    assert final["stop_reason"] == "end_turn"
    assert not any("input_json_delta" in e.data for e in out)


def test_streaming_two_calls_one_blocked_keeps_the_other_and_stop_reason() -> None:
    events = stream(
        tool_use_block(0, "bash", {"command": "ls"}),
        tool_use_block(1, "bash", {"command": "rm -rf ~"}),
        tool_use_block(2, "read", {"path": "rm -rf"}),
        stop_reason="tool_use",
    )
    final = assemble(run_stream(BLOCK_BASH_RM, events))
    assert [b["type"] for b in final["content"]] == ["tool_use", "text", "tool_use"]
    assert final["content"][0]["input"] == {"command": "ls"}
    assert final["content"][2]["input"] == {"path": "rm -rf"}
    assert final["stop_reason"] == "tool_use"


def test_streaming_passes_other_events_through_as_they_arrive() -> None:
    held = tool_use_block(0, "bash", {"command": "rm -rf /"})
    unknown = message_start().from_json("future_event", {"type": "future_event", "x": 1})
    events = [message_start(), held[0], ping(), held[1], unknown, *held[2:]]
    policy_out = [e.event for e in run_stream(BLOCK_BASH_RM, events)]
    assert policy_out[:3] == ["message_start", "ping", "future_event"]
    assert policy_out[3:] == ["content_block_start", "content_block_delta", "content_block_stop"]
    allowed = run_stream(BLOCK_BASH_RM, [message_start(), *tool_use_block(0, "bash", {"a": 1})])
    assert [e.data for e in allowed[1:]] == [e.data for e in tool_use_block(0, "bash", {"a": 1})]


def test_streaming_unparseable_input_is_blocked_and_an_unfinished_call_dropped() -> None:
    block = tool_use_block(0, "bash", {"command": "ls"})
    broken = block[1].from_json(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{nope"},
        },
    )
    out = run_stream(BLOCK_BASH_RM, [message_start(), block[0], broken, block[-1]])
    assert "not valid JSON" in assemble(out)["content"][0]["text"]
    cut = run_stream(BLOCK_BASH_RM, [message_start(), *block[:-1]])
    assert [e.event for e in cut] == ["message_start"]


def test_streaming_text_only_stream_is_unchanged() -> None:
    events = [message_start(), *text_block(0, "rm -rf"), message_delta(), message_stop()]
    out = run_stream(BLOCK_BASH_RM, events)
    assert [e.data for e in out] == [e.data for e in events]


def test_two_gates_in_a_chain_compose() -> None:
    second = BlockToolCalls({"rules": [{"tool": "read"}]})
    events = stream(
        tool_use_block(0, "bash", {"command": "rm -rf /"}),
        tool_use_block(1, "read", {"path": "x"}),
        tool_use_block(2, "write", {"path": "x"}),
        stop_reason="tool_use",
    )
    final = assemble(run_stream([BLOCK_BASH_RM, second], events))
    assert [b["type"] for b in final["content"]] == ["text", "text", "tool_use"]
    assert json.loads(json.dumps(final))["stop_reason"] == "tool_use"
