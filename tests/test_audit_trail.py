"""The audit trail through the real gateway: every policy action, the tokens, the chain version.

Each call's log line carries `policy_actions`, `model`, the token counts and
`chain_version`; EMF counts PolicyActions by policy and action and the tokens
by model, the model dimension bounded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx2
import pytest
from gateway_policies import PolicyContext
from gateway_policies.builtin.block_tool_calls import BlockToolCalls
from gateway_policies.detect import catalogue_version
from gateway_policies.testing import as_pairs, stream, text_block, tool_use_block
from policy_gateway import names, settings
from policy_gateway.call import Call
from policy_gateway.lambda_context import InvocationContext
from policy_gateway.observability import audit, metrics

from .support.client import HEADERS, policy_chain, request_body
from .support.clock import ManualClock
from .support.fake_resources import succeeded
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message, text_events
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import ask, both, sdk

SECRET = "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"
BLOCK_BASH = policy_chain(("block_tool_calls", {"rules": [{"tool": "^bash$"}]}))
USAGE = {
    "input_tokens": 1234,
    "output_tokens": 56,
    "cache_creation_input_tokens": 78,
    "cache_read_input_tokens": 910,
}
PARAMETER = settings.DEFAULT_POLICY_CONFIG_PARAMETER
TTL = 0.5


def tool_reply(streaming: bool, tool: str, args: dict[str, Any]) -> Reply:
    if streaming:
        events = stream(
            text_block(0, "let me"), tool_use_block(1, tool, args), stop_reason="tool_use"
        )
        return Reply(events=as_pairs(events))
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "let me"},
        {"type": "tool_use", "id": "toolu_1", "name": tool, "input": args},
    ]
    return Reply(body=message("", content=content) | {"stop_reason": "tool_use"})


# ------------------------------------------------------------------ policy actions


@both
def test_a_blocked_tool_call_is_on_the_call_line_and_counted(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    upstream.script(tool_reply(streaming, "bash", {"command": "rm -rf /"}))
    reply = ask(sdk(url), streaming)
    assert [block.type for block in reply.content] == ["text", "text"]
    (line,) = gateway_stdout.call_lines(1)
    assert line["policy_actions"] == [
        {"policy": "block_tool_calls", "action": "block", "tool": "bash"}
    ]
    assert (
        gateway_stdout.counted(
            names.METRIC_POLICY_ACTIONS, policy="block_tool_calls", action="block"
        )
        == 1
    )
    # The tool's input is the model's text, never the audit's.
    assert "rm -rf" not in json.dumps(line)


@both
def test_a_redaction_and_a_cap_are_recorded_with_kinds_and_counts_never_the_secret(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    chain = policy_chain(("redact_secrets", {}), ("cap_max_tokens", {"max": 100}))
    url = make_gateway(policy_config=chain)
    text = f"keys {SECRET} and {SECRET}, mail ops@example.com"
    ask(sdk(url), streaming, max_tokens=4000, messages=[{"role": "user", "content": text}])
    (line,) = gateway_stdout.call_lines(1)
    assert line["policy_actions"] == [
        {
            "policy": "redact_secrets",
            "action": "redact",
            "where": "request",
            "kind": "anthropic_api_key",
            "count": 2,
        },
        {
            "policy": "redact_secrets",
            "action": "redact",
            "where": "request",
            "kind": "email",
            "count": 1,
        },
        {"policy": "cap_max_tokens", "action": "cap", "field": "max_tokens", "limit": 100},
    ]
    assert (
        gateway_stdout.counted(
            names.METRIC_POLICY_ACTIONS, policy="redact_secrets", action="redact"
        )
        == 2
    )
    assert (
        gateway_stdout.counted(names.METRIC_POLICY_ACTIONS, policy="cap_max_tokens", action="cap")
        == 1
    )
    assert SECRET not in gateway_stdout.text
    assert "ops@example.com" not in gateway_stdout.text


def test_a_refusal_is_recorded_once_naming_the_policy(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway(policy_config=policy_chain(("cap_max_tokens", {"max": 100})))
    refused = httpx2.post(
        f"{url}/v1/messages", json=request_body(max_tokens="lots"), headers=HEADERS
    )
    assert refused.status_code == 400
    (line,) = gateway_stdout.call_lines(1)
    assert line["policy_actions"] == [
        {
            "policy": "cap_max_tokens",
            "action": "refuse",
            "status": 400,
            "error_type": "invalid_request_error",
        }
    ]
    assert gateway_stdout.counted(names.METRIC_POLICY_REFUSALS) == 1
    assert upstream.requests == []


def test_a_call_without_actions_writes_no_dimensioned_metric(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    assert httpx2.post(f"{url}/v1/messages", json=request_body(), headers=HEADERS).is_success
    (line,) = gateway_stdout.call_lines(1)
    assert line["policy_actions"] == []
    assert not any(names.METRIC_POLICY_ACTIONS in doc for doc in gateway_stdout.lines())


# ----------------------------------------------------------------------- tokens


def test_json_usage_is_on_the_call_line_and_counted_by_model(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway()
    upstream.script(Reply(body=message("hi", model="claude-answering-1") | {"usage": USAGE}))
    assert httpx2.post(f"{url}/v1/messages", json=request_body(), headers=HEADERS).is_success
    (line,) = gateway_stdout.call_lines(1)
    assert {key: line[key] for key in ("model", *USAGE)} == {"model": "claude-answering-1", **USAGE}
    by_model = {"model": "claude-answering-1"}
    assert gateway_stdout.counted(names.METRIC_INPUT_TOKENS, **by_model) == 1234
    assert gateway_stdout.counted(names.METRIC_OUTPUT_TOKENS, **by_model) == 56


def usage_stream(cut_after: int | None = None) -> Reply:
    events = text_events(["one", " two", " three"], model="claude-streaming-1")
    start = events[0][1]["message"]
    start["usage"] = {**USAGE, "output_tokens": 1}
    events[-2][1]["usage"] = {"output_tokens": 56}
    return Reply(events=events, break_after=cut_after)


def test_stream_usage_is_message_start_and_the_last_message_delta(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway()
    upstream.script(usage_stream())
    response = httpx2.post(f"{url}/v1/messages", json=request_body(stream=True), headers=HEADERS)
    assert response.status_code == 200
    (line,) = gateway_stdout.call_lines(1)
    assert {key: line[key] for key in ("model", *USAGE)} == {"model": "claude-streaming-1", **USAGE}


def test_a_stream_cut_short_reports_what_it_saw(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway()
    upstream.script(usage_stream(cut_after=4))
    response = httpx2.post(f"{url}/v1/messages", json=request_body(stream=True), headers=HEADERS)
    assert "event: error" in response.text
    (line,) = gateway_stdout.call_lines(1)
    assert line["model"] == "claude-streaming-1"
    assert line["input_tokens"] == 1234
    assert line["output_tokens"] == 1


def test_batch_results_sum_the_succeeded_entries_usage(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    first = message("a") | {"usage": USAGE}
    second = message("b") | {"usage": {"input_tokens": 6, "output_tokens": 4}}
    upstream.resources.results["msgbatch_fake_0001"] = [
        succeeded("a", first),
        succeeded("b", second),
    ]
    url = make_gateway(policy_config=BLOCK_BASH)
    sdk(url).messages.batches.create(
        requests=[{"custom_id": "a", "params": request_body()}]  # type: ignore[typeddict-item]
    )
    results = httpx2.get(f"{url}/v1/messages/batches/msgbatch_fake_0001/results", headers=HEADERS)
    assert results.status_code == 200
    line = gateway_stdout.call_lines(2)[-1]
    assert line["endpoint"] == "batch_results"
    assert (line["model"], line["input_tokens"], line["output_tokens"]) == (MODEL, 1240, 60)
    assert line["cache_read_input_tokens"] == 910


def test_a_thousand_client_model_strings_make_a_bounded_model_dimension(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even an upstream that answers with whatever model the client named is bounded."""
    monkeypatch.setattr(metrics, "_models", set())
    upstream.rules = lambda body: Reply(body=message("hi", model=str(body["model"])))
    url = make_gateway()
    with httpx2.Client(headers=HEADERS) as client:
        for number in range(1000):
            body = request_body(model=f"claude-made-up-{number}")
            assert client.post(f"{url}/v1/messages", json=body).is_success
    gateway_stdout.call_lines(1000)
    models = {
        line["model"]
        for line in gateway_stdout.lines()
        if "_aws" in line and names.METRIC_INPUT_TOKENS in line
    }
    assert len(models) == names.MAX_MODEL_DIMENSIONS + 1
    assert names.MODEL_OTHER in models
    assert gateway_stdout.counted(names.METRIC_INPUT_TOKENS, model=names.MODEL_OTHER) == 10 * (
        1000 - names.MAX_MODEL_DIMENSIONS
    )


# ------------------------------------------------------------------ chain version


def version_of(text: str, parameter_version: int) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"v{parameter_version}:{digest}.r{catalogue_version()[:8]}"


def test_a_live_chain_change_logs_one_load_and_the_next_call_carries_its_version(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    ssm: Any,
    clock: ManualClock,
) -> None:
    def put(value: str) -> int:
        answer = ssm.put_parameter(Name=PARAMETER, Value=value, Type="String", Overwrite=True)
        return int(answer["Version"])

    first = policy_chain(("cap_max_tokens", {"max": 100}))
    second = policy_chain(("redact_secrets", {}), ("cap_max_tokens", {"max": 50}))
    first_version = version_of(first, put(first))
    url = make_gateway(policy_config_parameter=PARAMETER, policy_config_ttl=TTL, clock=clock)
    client = sdk(url)
    ask(client, False)
    clock.advance(TTL + 0.1)
    ask(client, False)  # the same version read again: no new load line
    second_version = version_of(second, put(second))
    clock.advance(TTL + 0.1)
    ask(client, True)
    lines = gateway_stdout.call_lines(3)
    assert [line["chain_version"] for line in lines] == [
        first_version,
        first_version,
        second_version,
    ]
    loads = [
        line
        for line in gateway_stdout.lines()
        if line.get("message") == names.LOG_POLICY_CHAIN_LOADED
    ]
    assert [(load["chain_version"], load["policies"]) for load in loads] == [
        (first_version, ["cap_max_tokens"]),
        (second_version, ["redact_secrets", "cap_max_tokens"]),
    ]


def test_a_bad_chain_logs_the_last_good_one_kept(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    ssm: Any,
    clock: ManualClock,
) -> None:
    good = policy_chain(("cap_max_tokens", {"max": 100}))
    answer = ssm.put_parameter(Name=PARAMETER, Value=good, Type="String", Overwrite=True)
    good_version = version_of(good, int(answer["Version"]))
    client = sdk(
        make_gateway(policy_config_parameter=PARAMETER, policy_config_ttl=TTL, clock=clock)
    )
    ask(client, False)
    ssm.put_parameter(Name=PARAMETER, Value="{not json", Type="String", Overwrite=True)
    clock.advance(TTL + 0.1)
    ask(client, False)
    assert [line["chain_version"] for line in gateway_stdout.call_lines(2)] == [good_version] * 2
    loads = [
        (line["chain_version"], line["kept_last_good"])
        for line in gateway_stdout.lines()
        if line.get("message") == names.LOG_POLICY_CHAIN_LOADED
    ]
    assert loads == [(good_version, False), (good_version, True)]


def test_an_inline_chain_is_versioned_by_its_hash_on_every_route(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    inline = (
        f"inline:{hashlib.sha256(BLOCK_BASH.encode()).hexdigest()[:8]}.r{catalogue_version()[:8]}"
    )
    assert httpx2.post(f"{url}/v1/messages", json=request_body(), headers=HEADERS).is_success
    assert httpx2.get(f"{url}/v1/models", headers=HEADERS).is_success
    assert [line["chain_version"] for line in gateway_stdout.call_lines(2)] == [inline, inline]


# ------------------------------------------------------------------ shadow actions


async def _no_send(message: Any) -> None:
    raise AssertionError("nothing is sent")


def test_shadow_actions_are_counted_under_their_own_dimension_set(
    gateway_stdout: GatewayStdout,
) -> None:
    """What a shadow-mode policy would have done (issue 25 runs them) counts with mode=shadow."""
    call = Call("call-1", "messages", {}, _no_send, InvocationContext(), None)
    enforced = PolicyContext("messages", False, "call-1")
    shadow = PolicyContext("messages", False, "call-1", shadow=True)
    call.contexts += [enforced, shadow]
    gate = BlockToolCalls({"rules": [{"tool": "^bash$"}]})
    enforced.record(gate, "block", tool="bash")
    shadow.record(gate, "block", tool="read")
    fields = audit.call_fields(call)
    metrics.flush()
    assert fields["policy_actions"] == [
        {"policy": "block_tool_calls", "action": "block", "tool": "bash"},
        {"policy": "block_tool_calls", "action": "block", "tool": "read", "shadow": True},
    ]
    by = {"policy": "block_tool_calls", "action": "block"}
    assert gateway_stdout.counted(names.METRIC_POLICY_ACTIONS, **by) == 1
    shadowed = {**by, names.DIMENSION_MODE: names.MODE_SHADOW}
    assert gateway_stdout.counted(names.METRIC_POLICY_ACTIONS, **shadowed) == 1
