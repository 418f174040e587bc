"""The passthrough fallback contract, end to end: SDK → gateway → fake upstream, SSM in moto."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from policy_gateway.local.simulator import create_simulator

from .support.client import policy_chain, sse_frames
from .support.clock import ManualClock
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message, text_events
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import REPLACE, USER, ask_text, sdk
from .support.servers import ROOT, json_lines, serving

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def sent_text(recorded: Any) -> str:
    return str(recorded.json["messages"][0]["content"][0]["text"])


def test_flag_off_propagates_the_policy_caused_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=REPLACE)
    upstream.script(Reply.error(400, "invalid_request_error", "bad codename"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask_text(sdk(url))
    assert caught.value.status_code == 400
    assert caught.value.body["error"]["message"] == "bad codename"  # type: ignore[index]
    assert len(upstream.requests) == 1
    assert sent_text(upstream.requests[0]) == "tell me about [codename]"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("status", [400, 404, 413, 422])
def test_flag_on_falls_back_to_the_original(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    status: int,
    stream: bool,
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE)
    upstream.script(Reply.error(status, ERROR_TYPES[status]))
    text = ask_text(sdk(url), stream=stream)
    assert text.startswith("echo:")
    assert len(upstream.requests) == 2
    first, second = upstream.requests
    assert sent_text(first) == "tell me about [codename]"
    assert sent_text(second) == USER
    assert second.json == {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": USER}]}],
        "system": "be brief",
        "metadata": {"user_id": "u-1"},
        **({"stream": True} if stream else {}),
    }


def test_unmodified_request_never_falls_back(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE)
    upstream.script(Reply.error(400, "invalid_request_error"))
    with pytest.raises(anthropic.BadRequestError):
        ask_text(sdk(url), text="nothing to replace here")
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 429, 500, 529])
def test_credential_throttle_and_server_errors_never_fall_back(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    status: int,
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE)
    upstream.script(Reply.error(status, ERROR_TYPES[status]))
    with pytest.raises(anthropic.APIStatusError) as caught:
        ask_text(sdk(url))
    assert caught.value.status_code == status
    assert caught.value.body["error"]["type"] == ERROR_TYPES[status]  # type: ignore[index]
    assert [sent_text(r) for r in upstream.requests] == ["tell me about [codename]"]


def _refusal_message(url: str, stream: bool) -> str:
    """The message of the 404 that one call through the gateway ends with."""
    with pytest.raises(anthropic.NotFoundError) as caught:
        ask_text(sdk(url), stream=stream)
    return str(caught.value.body["error"]["message"])  # type: ignore[index]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_the_retry_failing_propagates_its_own_error(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    stream: bool,
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE)
    upstream.script(
        Reply.error(400, "invalid_request_error", "modified is bad"),
        Reply.error(404, "not_found_error", "original is bad too"),
        Reply.error(400, "invalid_request_error", "a third call must never happen"),
    )
    assert _refusal_message(url, stream) == "original is bad too"
    assert len(upstream.requests) == 2


def test_mid_stream_failure_never_falls_back(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE)
    upstream.script(Reply(events=text_events(["one ", "two ", "three"]), break_after=5))
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": USER}],
    }
    with httpx2.stream("POST", f"{url}/v1/messages", json=body) as response:
        assert response.status_code == 200
        frames = response.read().decode().strip().split("\n\n")
    names = [frame.split("\n")[0].removeprefix("event: ") for frame in frames]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "error",
    ]
    error = json.loads(frames[-1].split("\n")[1].removeprefix("data: "))
    assert error["type"] == "error"
    assert error["error"]["type"] == "api_error"
    assert len(upstream.requests) == 1

    upstream.script(Reply(events=text_events(["one ", "two ", "three"]), break_after=5))
    seen: list[str] = []
    stream = sdk(url).messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": USER}]
    )
    with pytest.raises(anthropic.APIStatusError), stream as events:  # noqa: PT012
        for event in events:
            seen.append(event.type)
    assert "content_block_delta" in seen
    assert len(upstream.requests) == 2


def test_in_place_nested_mutation_leaves_the_original_pristine(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=policy_chain(("tests.support.policies:MutateNested", {})))
    upstream.script(Reply.error(400, "invalid_request_error"))
    ask_text(sdk(url))
    first, second = upstream.requests
    assert sent_text(first) == USER + " [mutated]"
    assert first.json["metadata"] == {"user_id": "mutated"}
    assert second.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": USER}]}
    ]
    assert second.json["metadata"] == {"user_id": "u-1"}


def test_response_policy_applies_to_the_fallback_response(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    config = {
        "policies": [
            {
                "policy": "string_replace",
                "options": {"replacements": [["secret-project", "[codename]"]], "apply_to": "both"},
            }
        ]
    }
    url = make_gateway(policy_config=json.dumps(config))
    upstream.script(
        Reply.error(422, "invalid_request_error"),
        Reply(body=message("the secret-project is fine")),
        Reply.error(422, "invalid_request_error"),
        Reply(events=text_events(["the ", "secret-project", " is fine"])),
    )
    assert ask_text(sdk(url)) == "the [codename] is fine"
    assert ask_text(sdk(url), stream=True) == "the [codename] is fine"
    assert len(upstream.requests) == 4


def test_non_bypassable_policy_blocks_the_fallback(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    url = make_gateway(
        policy_config=json.dumps(
            {"policies": [{"policy": "tests.support.policies:GuardedRewrite"}]}
        )
    )
    upstream.script(Reply.error(404, "not_found_error", "model: claude-guarded"))
    with pytest.raises(anthropic.NotFoundError):
        ask_text(sdk(url))
    assert [r.json["model"] for r in upstream.requests] == ["claude-guarded"]


def test_flag_flip_is_seen_within_the_ttl_without_restart(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    clock: ManualClock,
) -> None:
    set_flag("false")
    url = make_gateway(policy_config=REPLACE, flag_ttl=1.0, clock=clock)
    client = sdk(url)
    upstream.script(Reply.error(400, "invalid_request_error"))
    with pytest.raises(anthropic.BadRequestError):
        ask_text(client)
    set_flag("TRUE")
    upstream.script(Reply.error(400, "invalid_request_error"))
    with pytest.raises(anthropic.BadRequestError):
        ask_text(client)  # still cached as off
    clock.advance(1.1)
    upstream.script(Reply.error(400, "invalid_request_error"))
    assert ask_text(client).startswith("echo:")
    assert len(upstream.requests) == 4


@pytest.mark.parametrize("value", [None, "yes", "1", "on"])
def test_missing_or_invalid_flag_means_off(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    value: str | None,
) -> None:
    if value is not None:
        set_flag(value)
    url = make_gateway(policy_config=REPLACE)
    assert ask_text(sdk(url)).startswith("echo:")
    upstream.script(Reply.error(400, "invalid_request_error"))
    with pytest.raises(anthropic.BadRequestError):
        ask_text(sdk(url))
    assert len(upstream.requests) == 2


def test_streaming_connect_time_error_keeps_its_http_status(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=REPLACE)
    upstream.script(Reply.error(400, "invalid_request_error", "stream refused"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask_text(sdk(url), stream=True)
    assert caught.value.status_code == 400
    assert caught.value.response.headers["content-type"].startswith("application/json")
    assert caught.value.response.headers["request-id"] == "req_fake_error"


# ------------------------------------------------------------- the retry ladder

RETIRED = "claude-retired-1"
SECRET = "sk-ant-api03-thisisasecretkey0123456789"
EMPTIED = "secret-project"


def only_live_models(body: dict[str, Any]) -> Reply | None:
    """The API's 404 for a model it no longer serves (every retired one here)."""
    if str(body.get("model", "")).startswith("claude-retired"):
        return Reply.error(404, "not_found_error", f"model: {body['model']}")
    return None


def no_empty_text(body: dict[str, Any]) -> Reply | None:
    """The API's rules that a text block holds text and a message (but a final prefill) content."""
    messages = body.get("messages", [])
    for index, entry in enumerate(messages):
        prefill = index == len(messages) - 1 and entry.get("role") == "assistant"
        if entry.get("content") == "" and not prefill:
            return Reply.error(
                400,
                "invalid_request_error",
                f"messages.{index}: all messages must have non-empty content "
                "except for the optional final assistant message",
            )
    blocks = [
        block
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
    ]
    if any(block.get("type") == "text" and block.get("text") == "" for block in blocks):
        return Reply.error(
            400, "invalid_request_error", "messages: text content blocks must be non-empty"
        )
    return None


def create_or_stream(url: str, params: dict[str, Any], stream: bool) -> None:
    client = sdk(url)
    if stream:
        with client.messages.stream(**params) as events:
            events.get_final_text()
    else:
        client.messages.create(**params)


def ask_blocks(url: str, blocks: list[str], stream: bool) -> str:
    params: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": text} for text in blocks]}
        ],
    }
    client = sdk(url)
    if stream:
        with client.messages.stream(**params) as events:
            return events.get_final_text()
    reply = client.messages.create(**params)
    return "".join(block.text for block in reply.content if block.type == "text")


def emf_values(lines: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    return [line for line in lines if "_aws" in line and metric in line]


EMPTYING = json.dumps(
    {
        "policies": [
            {"policy": "string_replace", "options": {"replacements": [[EMPTIED, ""]]}},
        ]
    }
)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_narrow_fallback_keeps_the_redaction_and_drops_the_model_rewrite(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    stream: bool,
) -> None:
    set_flag("true")
    upstream.rules = only_live_models
    chain = {
        "policies": [
            {"policy": "redact_secrets"},
            {"policy": "rewrite_model", "options": {"map": {MODEL: RETIRED}}},
        ]
    }
    url = make_gateway(policy_config=json.dumps(chain))
    text = ask_text(sdk(url), stream=stream, text=f"my key is {SECRET}")
    assert text.replace(" ", "") == "echo:mykeyis[REDACTED:anthropic_api_key]"
    assert [r.json["model"] for r in upstream.requests] == [RETIRED, MODEL]
    assert all(SECRET not in r.body.decode() for r in upstream.requests)
    assert all("[REDACTED:anthropic_api_key]" in sent_text(r) for r in upstream.requests)
    output = gateway_stdout.until(lambda text: "passthrough fallback:" in text)
    (warning,) = [
        line for line in json_lines(output) if "passthrough fallback:" in line.get("message", "")
    ]
    assert warning["fallback_scope"] == "narrow"
    assert warning["bypassed_policies"] == ["rewrite_model"]
    assert warning["kept_policies"] == ["redact_secrets"]
    assert warning["changed_by_policy"]["rewrite_model"] == ["$.model"]
    (emf,) = emf_values(json_lines(output), "PassthroughFallback")
    assert emf["fallback_scope"] == "narrow"


def test_a_chain_without_non_bypassable_policies_falls_back_in_full(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE)
    upstream.script(Reply.error(400, "invalid_request_error"))
    assert ask_text(sdk(url)) == f"echo: {USER}"
    assert sent_text(upstream.requests[1]) == USER
    output = gateway_stdout.until(lambda text: "passthrough fallback:" in text)
    (warning,) = [
        line for line in json_lines(output) if "passthrough fallback:" in line.get("message", "")
    ]
    assert (warning["fallback_scope"], warning["kept_policies"]) == ("full", [])
    assert warning["bypassed_policies"] == ["string_replace"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("flag", ["false", "true"])
def test_an_emptied_text_block_is_repaired_before_sending(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    flag: str,
    stream: bool,
) -> None:
    set_flag(flag)
    upstream.rules = no_empty_text
    url = make_gateway(policy_config=EMPTYING)
    assert ask_blocks(url, ["hello", EMPTIED], stream).replace(" ", "") == "echo:hello"
    (sent,) = upstream.requests  # no fallback, not even with the flag on: the repair won
    assert sent.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    ]
    assert EMPTIED not in sent.body.decode()
    output = gateway_stdout.until(lambda text: "PolicyRepairs" in text)
    (emf,) = emf_values(json_lines(output), "PolicyRepairs")
    assert (emf["service"], emf["policy"]) == ("policy-gateway", "string_replace")
    assert emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service", "policy"]]
    (logged,) = [line for line in json_lines(output) if line.get("repairs")]
    assert logged["repairs"] == [
        {
            "policy": "string_replace",
            "rule": "empty_text_block",
            "count": 1,
            "paths": ["$.messages[0].content[1]"],
        }
    ]
    assert not emf_values(json_lines(output), "PassthroughFallback")
    # The repair is one of the call's policy actions, after the change it repaired.
    (line,) = gateway_stdout.call_lines(1)
    assert [a["action"] for a in line["policy_actions"]] == ["rewrite", "repair"]
    assert line["policy_actions"][-1] == {
        "policy": "string_replace",
        "action": "repair",
        "rule": "empty_text_block",
        "count": 1,
        "paths": ["$.messages[0].content[1]"],
    }


MANY = 20_000


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_many_emptied_blocks_are_one_summed_repair(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    stream: bool,
) -> None:
    """Issue 31: 20,000 blocks a policy empties are one WARNING and one policy action (the
    count, the rule, the first paths), not 20,000; the quadratic repair also took seconds of
    CPU here (its cost is figure (11) of the bench)."""
    upstream.rules = no_empty_text
    url = make_gateway(policy_config=EMPTYING)
    assert ask_blocks(url, ["hello", *[EMPTIED] * MANY], stream).replace(" ", "") == "echo:hello"
    (sent,) = upstream.requests
    assert sent.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    ]
    summary = {
        "policy": "string_replace",
        "rule": "empty_text_block",
        "count": MANY,
        "paths": [f"$.messages[0].content[{index}]" for index in range(1, 6)],
    }
    (line,) = gateway_stdout.call_lines(1)
    repairs = [a for a in line["policy_actions"] if a["action"] == "repair"]
    assert repairs == [{**summary, "action": "repair"}]
    lines = json_lines(gateway_stdout.text)
    assert [
        logged["repairs"] for logged in lines if "policy repair:" in logged.get("message", "")
    ] == [[summary]]
    (emf,) = emf_values(lines, "PolicyRepairs")
    assert emf["PolicyRepairs"] == [MANY]


def test_a_message_left_empty_gets_a_block_naming_the_policy(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    upstream.rules = no_empty_text
    url = make_gateway(policy_config=EMPTYING)
    ask_blocks(url, [EMPTIED], stream=False)
    (sent,) = upstream.requests
    assert sent.json["messages"][0]["content"] == [
        {"type": "text", "text": "[content removed by policy string_replace]"}
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_string_content_a_policy_emptied_is_repaired_before_sending(
    make_gateway: GatewayFactory, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.rules = no_empty_text
    url = make_gateway(policy_config=EMPTYING)
    params: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": EMPTIED}],
    }
    create_or_stream(url, params, stream)
    (sent,) = upstream.requests  # repaired before sending, the flag off: one attempt
    assert sent.json["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "[content removed by policy string_replace]"}],
        }
    ]
    assert EMPTIED not in sent.body.decode()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_system_string_a_policy_emptied_adds_no_field(
    make_gateway: GatewayFactory, upstream: FakeUpstream, stream: bool
) -> None:
    """Review: the repair took an emptied `system` string for a message's content and put a
    top-level `content` field (which the API refuses) on the request it sent."""
    url = make_gateway(policy_config=EMPTYING)
    params: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 64,
        "system": EMPTIED,
        "messages": [{"role": "user", "content": "hello"}],
    }
    create_or_stream(url, params, stream)
    (sent,) = upstream.requests
    assert sorted(sent.json) == sorted([*params, *(["stream"] if stream else [])])
    assert sent.json["messages"] == params["messages"]


def test_a_client_sent_empty_text_block_is_the_clients_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    upstream.rules = no_empty_text
    url = make_gateway(policy_config=EMPTYING)
    with pytest.raises(anthropic.BadRequestError):
        ask_blocks(url, ["", EMPTIED], stream=False)
    # Only the client's own empty block is left: the policy's was repaired, and the
    # fallback resends the original, whose empty block is the client's.
    first, second = upstream.requests
    assert first.json["messages"][0]["content"] == [{"type": "text", "text": ""}]
    assert second.json["messages"][0]["content"][1]["text"] == EMPTIED


ROTATING = json.dumps(
    {
        "policies": [
            {
                "policy": "rewrite_model",
                "options": {"map": {MODEL: [RETIRED, "claude-retired-2", "claude-live-3"]}},
            }
        ]
    }
)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_rewrite_model_moves_to_its_next_target_on_a_404(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    stream: bool,
) -> None:
    chain = {
        "policies": [
            {"policy": "rewrite_model", "options": {"map": {MODEL: [RETIRED, "claude-live-2"]}}}
        ]
    }
    upstream.rules = only_live_models
    url = make_gateway(policy_config=json.dumps(chain))
    assert ask_text(sdk(url), stream=stream).startswith("echo:")
    assert [r.json["model"] for r in upstream.requests] == [RETIRED, "claude-live-2"]
    output = gateway_stdout.until(lambda text: "PolicyRepairs" in text)
    (logged,) = [line for line in json_lines(output) if line.get("repairs")]
    assert logged["repairs"] == [
        {"policy": "rewrite_model", "rule": "on_upstream_error", "count": 1, "paths": ["$.model"]}
    ]
    (emf,) = emf_values(json_lines(output), "PolicyRepairs")
    assert emf["policy"] == "rewrite_model"
    assert emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service", "policy"]]
    (line,) = gateway_stdout.call_lines(1)
    assert line["policy_actions"] == [
        {
            "policy": "rewrite_model",
            "action": "rewrite",
            "field": "model",
            "from": MODEL,
            "to": RETIRED,
        },
        {
            "policy": "rewrite_model",
            "action": "repair",
            "rule": "on_upstream_error",
            "count": 1,
            "paths": ["$.model"],
        },
    ]
    # The flag is off: a repair needs none, and it is no fallback.
    assert not emf_values(json_lines(output), "PassthroughFallback")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_no_call_makes_more_than_three_upstream_attempts(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    stream: bool,
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=ROTATING)
    upstream.script(
        Reply.error(404, "not_found_error", "first"),
        Reply.error(404, "not_found_error", "repair failed too"),
        Reply.error(404, "not_found_error", "the fallback's own error"),
        Reply.error(404, "not_found_error", "a fourth attempt must never happen"),
    )
    assert _refusal_message(url, stream) == "the fallback's own error"
    # policy, repair (one rung: the next target only), fallback (the client's model)
    assert [r.json["model"] for r in upstream.requests] == [RETIRED, "claude-retired-2", MODEL]


def test_repairs_spend_the_callers_budget_like_fallbacks(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    upstream.rules = lambda body: Reply.error(404, "not_found_error", "no model serves this")
    url = make_gateway(policy_config=ROTATING, fallback_budget=3)
    client = sdk(url)
    for _ in range(5):
        with pytest.raises(anthropic.NotFoundError):
            ask_text(client)
    # Five calls, and at most the budget's three extra attempts between them,
    # however the caller makes the policy's change fail.
    assert len(upstream.requests) == 5 + 3
    assert [r.json["model"] for r in upstream.requests[:5]] == [
        RETIRED,
        "claude-retired-2",
        MODEL,
        RETIRED,
        "claude-retired-2",
    ]


def test_the_narrow_fallback_keeps_the_structural_repair_of_a_kept_change(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    upstream.rules = lambda body: only_live_models(body) or no_empty_text(body)
    chain = {
        "policies": [
            {"policy": "tests.support.policies:BlankClassified"},
            {"policy": "rewrite_model", "options": {"map": {MODEL: RETIRED}}},
        ]
    }
    url = make_gateway(policy_config=json.dumps(chain))
    assert ask_blocks(url, ["hello", "the classified plan"], stream=False) == "echo: hello"
    first, fallback = upstream.requests
    assert [first.json["model"], fallback.json["model"]] == [RETIRED, MODEL]
    for sent in (first, fallback):
        assert sent.json["messages"][0]["content"] == [{"type": "text", "text": "hello"}]
        assert "classified" not in sent.body.decode()


EVENTS = ROOT / "events"
DEMO_TOKEN = "TICKET-REF-0042"


@pytest.mark.parametrize(
    ("chain", "flag", "status", "attempts", "fallback"),
    [
        ("repair-demo.json", "false", 200, 1, "none"),
        ("fallback-demo.json", "false", 404, 1, "none"),
        ("fallback-demo.json", "true", 200, 2, "succeeded"),
    ],
)
def test_the_sample_chains_show_the_repair_and_the_fallback(
    make_gateway: GatewayFactory,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    chain: str,
    flag: str,
    status: int,
    attempts: int,
    fallback: str,
) -> None:
    """events/README.md's demos, against `make run`'s simulator, which refuses as the API does."""
    set_flag(flag)
    with serving(create_simulator()) as simulator:
        url = make_gateway(
            upstream_base_url=simulator.url,
            policy_config=(EVENTS / "policies" / chain).read_text(),
        )
        answer = httpx2.post(
            f"{url}/v1/messages",
            content=(EVENTS / "bodies" / "fallback.json").read_bytes(),
            headers={"x-api-key": "sk-ant-demo", "content-type": "application/json"},
        )
        (line,) = gateway_stdout.call_lines(1)
    assert answer.status_code == status, answer.text
    assert (line["attempts"], line["fallback"]) == (attempts, fallback)
    if status != 200:
        return
    # The simulator echoes the text it was sent.
    echoed = "".join(
        json.loads(data)["delta"].get("text", "")
        for name, data in sse_frames(answer.text)
        if name == "content_block_delta"
    )
    assert "nightly export" in echoed
    if chain == "repair-demo.json":
        assert DEMO_TOKEN not in echoed  # the emptied block was never sent
        assert line["policy_actions"][-1]["action"] == "repair"
    else:
        assert DEMO_TOKEN in echoed  # the original, as the client sent it
        warning = gateway_stdout.until(lambda text: "passthrough fallback:" in text)
        assert '"fallback_scope":"full"' in warning
