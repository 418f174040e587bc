"""Every built-in policy through the running gateway, with the official SDK as the client.

SDK → gateway (uvicorn, in-thread) → fake upstream; the judge policy talks to
a second fake served over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from gateway_policies import StreamEvent, recorder
from gateway_policies.runtime.sse import SSEDecoder
from gateway_policies.testing import (
    as_pairs,
    assemble,
    stream,
    tool_use_block,
)

from .conftest import PutSecret
from .support.client import policy_chain
from .support.clock import ManualClock
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import ask, both, sdk
from .support.servers import ThreadedServer
from .support.tool_calls import BASH_RM, TOOLS, kinds, tool_reply

SECRET = "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"


# ------------------------------------------------------- request policies


@both
def test_redact_secrets(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    url = make_gateway(policy_config=policy_chain(("redact_secrets", {})))
    content = [{"type": "text", "text": f"my key is {SECRET}, mail ops@example.com"}]
    ask(sdk(url), streaming, messages=[{"role": "user", "content": content}], system=SECRET)
    sent = upstream.requests[0]
    assert SECRET.encode() not in sent.body
    assert sent.json["system"] == "[REDACTED:anthropic_api_key]"
    assert sent.json["messages"][0]["content"][0]["text"] == (
        "my key is [REDACTED:anthropic_api_key], mail [REDACTED:email]"
    )


@both
def test_rewrite_model(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    url = make_gateway(
        policy_config=policy_chain(("rewrite_model", {"map": {MODEL: "claude-cheap"}}))
    )
    ask(sdk(url), streaming)
    assert upstream.requests[0].json["model"] == "claude-cheap"


@both
def test_cap_max_tokens(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    url = make_gateway(policy_config=policy_chain(("cap_max_tokens", {"max": 50})))
    ask(sdk(url), streaming, max_tokens=4000)
    assert upstream.requests[0].json["max_tokens"] == 50


@both
def test_strip_tools(make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool) -> None:
    url = make_gateway(policy_config=policy_chain(("strip_tools", {"names": ["bash"]})))
    ask(sdk(url), streaming, tools=TOOLS, tool_choice={"type": "tool", "name": "bash"})
    sent = upstream.requests[0].json
    assert [t["name"] for t in sent["tools"]] == ["read"]
    assert sent["tool_choice"] == {"type": "auto"}


@both
def test_inject_system_prompt(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    url = make_gateway(
        policy_config=policy_chain(("inject_system_prompt", {"text": "Be careful."}))
    )
    ask(sdk(url), streaming, system="You help.")
    assert upstream.requests[0].json["system"] == "Be careful.\n\nYou help."


@both
def test_string_replace_both_ways(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    options = {"replacements": [["hello", "bonjour"]], "apply_to": "both"}
    url = make_gateway(policy_config=policy_chain(("string_replace", options)))
    reply = ask(sdk(url), streaming)
    assert upstream.requests[0].json["messages"][0]["content"] == "bonjour"
    assert reply.content[0].type == "text"
    assert reply.content[0].text.replace(" ", "") == "echo:bonjour"


# ------------------------------------------------------- block_tool_calls


@both
def test_block_tool_calls_replaces_the_call_after_a_text_block(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": [BASH_RM]})))
    upstream.script(tool_reply(streaming, ("bash", {"command": "rm -rf /"}), text="Cleaning."))
    reply = ask(sdk(url), streaming, tools=TOOLS)
    assert kinds(reply) == ["text", "text"]
    assert reply.content[0].text == "Cleaning."  # type: ignore[union-attr]
    assert "blocked a call to tool 'bash'" in reply.content[1].text  # type: ignore[union-attr]
    assert reply.stop_reason == "end_turn"


@both
def test_block_tool_calls_two_calls_only_one_blocked(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": [BASH_RM]})))
    upstream.script(
        tool_reply(streaming, ("bash", {"command": "rm -rf ~"}), ("read", {"path": "a.txt"}))
    )
    reply = ask(sdk(url), streaming, tools=TOOLS)
    assert kinds(reply) == ["text", "tool_use"]
    assert reply.content[1].input == {"path": "a.txt"}  # type: ignore[union-attr]
    assert reply.stop_reason == "tool_use"


def raw_stream(url: str, body: dict[str, Any]) -> list[StreamEvent]:
    decoder = SSEDecoder()
    events: list[StreamEvent] = []
    with httpx2.stream("POST", f"{url}/v1/messages", json=body) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            events.extend(decoder.feed(chunk))
    return events + decoder.flush()


def test_blocked_stream_on_the_wire_has_contiguous_indices_and_end_turn(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": [BASH_RM]})))
    upstream.script(
        tool_reply(
            True,
            ("bash", {"command": "rm -rf /"}),
            ("read", {"path": "x"}),
            ("bash", {"command": "rm -rf ~"}),
            text="Sure.",
        )
    )
    messages = [{"role": "user", "content": "hi"}]
    body = {"model": MODEL, "max_tokens": 9, "stream": True, "messages": messages}
    events = raw_stream(url, body)
    starts = [e.json for e in events if e.event == "content_block_start"]
    assert [(s["index"], s["content_block"]["type"]) for s in starts] == [
        (0, "text"),
        (1, "text"),
        (2, "tool_use"),
        (3, "text"),
    ]
    final = assemble(events)
    assert final["content"][2]["input"] == {"path": "x"}
    assert final["stop_reason"] == "tool_use"
    assert [e.event for e in events][-2:] == ["message_delta", "message_stop"]


# ---------------------------------------------------------- tool_call_judge


@pytest.fixture
def judge() -> Iterator[tuple[FakeUpstream, str]]:
    fake = FakeUpstream()
    server = ThreadedServer(fake).start()
    yield fake, server.url
    server.stop()


def verdict(risk: float, reason: str = "", decision: str = "allow") -> Reply:
    """The judge's answer: a call of the verdict tool (never text) carrying the risk."""
    given = {"decision": decision, "reason": reason, "risk": risk}
    call = {"type": "tool_use", "id": "toolu_v", "name": "verdict", "input": given}
    return Reply(body=message("", content=[call]))


def judged_data(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON the judge request carries inside its nonce delimiter."""
    user = body["messages"][0]["content"]
    loaded: dict[str, Any] = json.loads(user.split("\n", 1)[1].rsplit("\n", 1)[0])
    return loaded


# The judge's SDK client keeps its pooled connection for the life of the event
# loop it runs on, as it should in a gateway process; a test gateway's loop ends
# at teardown with that connection open, which asyncio reports. Nothing leaks
# in a serving gateway, so the judge's tests list this one warning.
judge_connection_outlives_the_test_loop = pytest.mark.filterwarnings(
    "ignore:unclosed resource <TCPTransport:ResourceWarning"
)


def judge_chain(judge_url: str, **options: Any) -> str:
    return policy_chain(
        (
            "tool_call_judge",
            {"base_url": judge_url, "api_key_env": "TEST_JUDGE_KEY", "model": "judge-1", **options},
        )
    )


@judge_connection_outlives_the_test_loop
@both
def test_judge_blocks_risky_and_allows_safe_calls(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    judge: tuple[FakeUpstream, str],
    monkeypatch: pytest.MonkeyPatch,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-ant-judge")
    fake_judge, judge_url = judge
    url = make_gateway(policy_config=judge_chain(judge_url, threshold=0.7))
    upstream.script(
        tool_reply(streaming, ("bash", {"command": "shred disk"}), ("read", {"path": "a"}))
    )
    fake_judge.script(verdict(0.95, "destroys data"), verdict(0.1))
    reply = ask(sdk(url), streaming, tools=TOOLS)
    assert kinds(reply) == ["text", "tool_use"]
    text = reply.content[0].text  # type: ignore[union-attr]
    assert "rated its risk 0.95 (threshold 0.7): destroys data" in text
    asked = [r.json for r in fake_judge.requests]
    assert [r["model"] for r in asked] == ["judge-1", "judge-1"]
    assert {judged_data(r)["block"]["name"] for r in asked} == {"bash", "read"}
    assert asked[0]["tool_choice"] == {"type": "tool", "name": "verdict"}
    assert fake_judge.requests[0].headers["x-api-key"] == "sk-ant-judge"
    gateway_stdout.until(lambda out: "call finished" in out)
    (line,) = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    judged = sorted(
        (
            {k: v for k, v in entry.items() if k not in ("latency_ms", "cached", "kind")}
            for entry in line["policy_actions"]
            if entry["action"] == "judge"
        ),
        key=lambda entry: str(entry["tool"]),
    )
    assert judged == [
        {
            "policy": "tool_call_judge",
            "action": "judge",
            "tool": "bash",
            "verdict": "block",
            "risk": 0.95,
        },
        {
            "policy": "tool_call_judge",
            "action": "judge",
            "tool": "read",
            "verdict": "allow",
            "risk": 0.1,
        },
    ]
    assert {"policy": "tool_call_judge", "action": "block", "tool": "bash"} in line[
        "policy_actions"
    ]


@judge_connection_outlives_the_test_loop
def test_deployed_judge_uses_the_gateways_own_anthropic_key(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    judge: tuple[FakeUpstream, str],
    monkeypatch: pytest.MonkeyPatch,
    put_secret: PutSecret,
    clock: ManualClock,
) -> None:
    """No judge key in the environment (as deployed): the judge gets the gateway's Anthropic
    key, through the gateway's own cached reader of the secret the template names in
    UPSTREAM_API_KEY_SECRET (moto's Secrets Manager); a rotation reaches it after that TTL."""
    put_secret("test/judge-key", json.dumps({"api_key": "sk-ant-from-secret"}))
    monkeypatch.delenv("TEST_JUDGE_KEY", raising=False)
    fake_judge, judge_url = judge
    url = make_gateway(
        policy_config=judge_chain(judge_url),
        upstream_api_key_secret="test/judge-key",
        secrets_ttl=60,
        clock=clock,
    )
    for expected in ("sk-ant-from-secret", "sk-ant-rotated"):
        # A call of its own each time: the same call again would be the memo's.
        upstream.script(tool_reply(False, ("read", {"path": expected})))
        fake_judge.script(verdict(0.1))
        assert kinds(ask(sdk(url), False, tools=TOOLS)) == ["tool_use"]
        assert fake_judge.requests[-1].headers["x-api-key"] == expected
        put_secret("test/judge-key", "sk-ant-rotated")
        clock.advance(61)


@judge_connection_outlives_the_test_loop
@both
@pytest.mark.parametrize("failure", ["500", "timeout", "nonsense", "negative", "string"])
def test_judge_failure_blocks_and_is_logged(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    judge: tuple[FakeUpstream, str],
    monkeypatch: pytest.MonkeyPatch,
    gateway_stdout: GatewayStdout,
    streaming: bool,
    failure: str,
) -> None:
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-ant-judge")
    fake_judge, judge_url = judge
    url = make_gateway(policy_config=judge_chain(judge_url, timeout=0.3))
    # The model's tool name, long and holding a key: the WARNING names it bounded.
    tool = "read" + "a" * 50_000 + SECRET + "b" * 50_000
    upstream.script(tool_reply(streaming, (tool, {"path": "a"})))
    fake_judge.script(
        {
            "500": Reply.error(500, "api_error"),
            "timeout": Reply(body=verdict(0).body, delay=1.0),
            "nonsense": Reply(body=message('{"decision": "allow", "risk": 0}')),
            "negative": verdict(-1, "trust me"),
            "string": Reply(
                body=message(
                    "",
                    content=[
                        {
                            "type": "tool_use",
                            "id": "toolu_v",
                            "name": "verdict",
                            "input": {"decision": "allow", "reason": "", "risk": "0.1"},
                        }
                    ],
                )
            ),
        }[failure]
    )
    reply = ask(sdk(url), streaming, tools=TOOLS)
    assert kinds(reply) == ["text"]
    assert "fail-secure" in reply.content[0].text  # type: ignore[union-attr]
    assert reply.stop_reason == "end_turn"
    judge_log = "judge failed; the block is handled as on_error says"
    out = gateway_stdout.until(lambda text: "call finished" in text)
    [line] = [line for line in gateway_stdout.lines() if line.get("message") == judge_log]
    assert line["level"] == "WARNING"
    assert line["name"] == "gateway_policies.judge"
    assert line["on_error"] == "block"
    assert line["tool"] == recorder.text(tool)
    assert line["call_id"]
    assert '"path"' not in out
    assert SECRET not in out


def test_unknown_events_pass_a_blocked_stream_and_the_sdk_parses_it(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(
        policy_config=policy_chain(("block_tool_calls", {"rules": [{"tool": "bash"}]}))
    )
    events = as_pairs(stream(tool_use_block(0, "bash", {"command": "ls"}), stop_reason="tool_use"))
    events.insert(3, ("future_event", {"type": "future_event", "detail": 1}))
    upstream.script(Reply(events=events), Reply(events=events))
    messages = [{"role": "user", "content": "hi"}]
    raw = raw_stream(url, {"model": MODEL, "max_tokens": 9, "stream": True, "messages": messages})
    assert [e.event for e in raw].count("future_event") == 1
    final = ask(sdk(url), True, tools=TOOLS)
    assert kinds(final) == ["text"]
    assert final.stop_reason == "end_turn"
