"""Edges of the security policies: where secrets hide, how rules read tool input, and
streams that do not end a tool call the way they should."""

from __future__ import annotations

from typing import Any

import pytest
from gateway_policies import PolicyConfigError, StreamEvent
from gateway_policies.builtin.block_tool_calls import BlockToolCalls
from gateway_policies.builtin.redact_secrets import RedactSecrets
from gateway_policies.builtin.strip_tools import StripTools
from gateway_policies.builtin.tool_call_judge import ToolCallJudge
from gateway_policies.testing import (
    assemble,
    message_delta,
    message_start,
    message_stop,
    run_request,
    run_stream,
    text_block,
    tool_use_block,
)
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.unit

KEY = "sk-ant-api03-" + "x" * 24
TEXT_DOCUMENT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": KEY},
}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": list(blocks)}]}


@pytest.mark.parametrize(
    "block",
    [
        TEXT_DOCUMENT,
        {
            "type": "document",
            "source": {"type": "content", "content": [{"type": "text", "text": KEY}]},
        },
        {"type": "document", "source": {"type": "url", "url": "https://x"}, "context": KEY},
        {
            "type": "search_result",
            "source": "s",
            "title": "t",
            "content": [{"type": "text", "text": KEY}],
        },
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": KEY},
                }
            ],
        },
    ],
    ids=["document-text", "document-content", "document-context", "search-result", "nested"],
)
def test_redaction_reaches_documents_and_search_results(block: dict[str, Any]) -> None:
    sent = run_request(RedactSecrets(), user(block))
    assert KEY not in repr(sent)
    assert "[REDACTED:anthropic_api_key]" in repr(sent)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("keys:\\n" + KEY, "anthropic_api_key"),
        ("MY_KEY_" + KEY, "anthropic_api_key"),
        ("a\\nAKIAABCDEFGHIJKLMNOP", "aws_access_key_id"),
        ("x\\nghp_" + "a" * 36, "github_token"),
        ('{\\"aws_secret_access_key\\": \\"' + "A" * 40 + '\\"}', "aws_secret_access_key"),
        ("secret_key: " + "b" * 40, "aws_secret_access_key"),
        ("Authorization: BEARER abc123def456ghi", "bearer_token"),
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nabc\n-----END PGP PRIVATE KEY BLOCK-----",
            "private_key",
        ),
    ],
)
def test_redaction_catches_variants(text: str, kind: str) -> None:
    sent = run_request(RedactSecrets(), user({"type": "text", "text": text}))
    redacted = sent["messages"][0]["content"][0]["text"]
    assert f"[REDACTED:{kind}]" in redacted


def test_input_rules_see_tool_input_as_the_tool_will() -> None:
    policy = BlockToolCalls({"rules": [{"tool": "^bash$", "input": r"rm\s+-rf"}]})
    events = [
        message_start(),
        *tool_use_block(0, "bash", {"command": "rm\t-rf /"}),
        message_delta("tool_use"),
        message_stop(),
    ]
    message = assemble(run_stream(policy, events))
    assert [block["type"] for block in message["content"]] == ["text"]
    assert message["stop_reason"] == "end_turn"


def test_judge_key_may_not_come_from_the_lambdas_aws_credentials() -> None:
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "_X_AMZN_TRACE_ID"):
        with pytest.raises(PolicyConfigError, match="api_key_env"):
            ToolCallJudge({"api_key_env": name})


GATE = BlockToolCalls({"rules": [{"tool": "^never$"}]})


def test_message_ending_while_a_tool_call_is_held_blocks_it_and_keeps_indices() -> None:
    unfinished = tool_use_block(1, "read", {"path": "a"})[:-1]
    events = [
        message_start(),
        *text_block(0, "hi"),
        *unfinished,
        message_delta("tool_use"),
        message_stop(),
    ]
    message = assemble(run_stream(GATE, events))
    assert [block["type"] for block in message["content"]] == ["text", "text"]
    assert "ended before its block did" in message["content"][1]["text"]
    assert message["stop_reason"] == "end_turn"


def test_a_second_tool_call_starting_while_one_is_held_settles_the_first() -> None:
    first = tool_use_block(0, "read", {"path": "a"})[:-1]
    second = tool_use_block(1, "read", {"path": "b"})
    events = [message_start(), *first, *second, message_delta("tool_use"), message_stop()]
    message = assemble(run_stream(GATE, events))
    assert [block["type"] for block in message["content"]] == ["text", "tool_use"]
    assert message["stop_reason"] == "tool_use"


def test_events_that_are_not_json_objects_pass_through_a_held_call() -> None:
    oddity = StreamEvent("vendor_note", "not json at all")
    block = tool_use_block(0, "read", {"path": "a"})
    events = [message_start(), block[0], oddity, *block[1:], message_delta("tool_use")]
    out = run_stream(GATE, events)
    assert oddity in out
    assert [e.event for e in out if e.event.startswith("content_block")] == [e.event for e in block]


BLOCKS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.text(max_size=20)),
        st.tuples(st.sampled_from(["bash", "read", "write"]), st.text(max_size=30)),
    ),
    max_size=6,
)


@settings(max_examples=80, deadline=None)
@given(blocks=BLOCKS, chunks=st.integers(min_value=1, max_value=5), pings=st.booleans())
def test_gated_streams_always_assemble_with_consistent_stop_reason(
    blocks: list[tuple[str, str]], chunks: int, pings: bool
) -> None:
    """Any mix of text and tool calls, any input split: the client's accumulator parses the
    result, no tool_use the rule matches survives, and stop_reason agrees with what is left."""
    gate = BlockToolCalls({"rules": [{"tool": "^bash$"}, {"input": "secret"}]})
    events = [message_start()]
    for index, (kind, value) in enumerate(blocks):
        block = (
            text_block(index, value)
            if kind == "text"
            else tool_use_block(index, kind, {"arg": value}, chunks=chunks)
        )
        if pings:
            block.insert(1, StreamEvent("ping", '{"type": "ping"}'))
        events += block
    has_calls = any(kind != "text" for kind, _ in blocks)
    events += [message_delta("tool_use" if has_calls else "end_turn"), message_stop()]
    message = assemble(run_stream(gate, events))
    content = message["content"]
    assert len(content) == len(blocks)
    kept = [block for block in content if block["type"] == "tool_use"]
    for block in kept:
        assert block["name"] != "bash"
        assert "secret" not in block["input"]["arg"]
    for original, block in zip(blocks, content, strict=True):
        if original[0] != "text" and block["type"] == "tool_use":
            assert block["input"] == {"arg": original[1]}
    if has_calls:
        assert message["stop_reason"] == ("tool_use" if kept else "end_turn")


TOOL_USE = {"type": "tool_use", "id": "t1", "name": "bash", "input": {}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}


def test_stripping_every_tool_from_a_tool_conversation_keeps_it_valid() -> None:
    policy = StripTools({"names": ["bash"]})
    request = {
        "model": "m",
        "max_tokens": 5,
        "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
        "messages": [
            {"role": "user", "content": "run ls"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ],
    }
    sent = run_request(policy, request)
    assert [tool["name"] for tool in sent["tools"]] == ["no_tools_available"]
    assert sent["tool_choice"] == {"type": "none"}
    plain = run_request(policy, {**request, "messages": [{"role": "user", "content": "hi"}]})
    assert "tools" not in plain
    assert "tool_choice" not in plain
