"""A client reads a stream as the upstream sent it, or reads one error: never something else.

Two upstream faults the relay refuses rather than passes on. A frame whose
`event:` name is missing or is not its data's `type`: the SDK dispatches on the
data's `type`, so a policy judging by the name could be walked around. And a
stream that ends before `message_stop`: relayed as it came, the client would
take a cut-short message for a finished one. Either way the client gets a 502
JSON before anything was sent, one `event: error` frame after.

SDK (or raw HTTP) → gateway (uvicorn, in-thread) → the fake upstream, which
here sends raw SSE bytes.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import pytest
from gateway_policies import StreamEvent
from gateway_policies.builtin.block_tool_calls import BlockToolCalls
from gateway_policies.builtin.string_replace import StringReplace
from gateway_policies.testing import (
    message_delta,
    message_start,
    message_stop,
    ping,
    run_stream,
    stream,
    text_block,
    tool_use_block,
)

from .support.client import error_of, policy_chain, sse_frames
from .support.fake_upstream import MODEL, FakeUpstream
from .support.framings import frame, post_stream, sse_reply, wire
from .support.gateway import GatewayFactory
from .support.sdk import sdk

TOOLS: list[Any] = [{"name": "bash", "description": "bash", "input_schema": {"type": "object"}}]
BLOCK_BASH = policy_chain(("block_tool_calls", {"rules": [{"tool": "^bash$"}]}))
CHAINS = pytest.mark.parametrize("chain", [None, BLOCK_BASH], ids=["no-policies", "tool-gate"])


def sdk_events(url: str) -> tuple[list[Any], anthropic.APIStatusError | None]:
    """The events the SDK's stream yields through the gateway, and the error it raised, if any."""
    seen: list[Any] = []
    try:
        events = sdk(url).messages.create(
            model=MODEL,
            max_tokens=64,
            tools=TOOLS,
            messages=[{"role": "user", "content": "run it"}],
            stream=True,
        )
        with events:
            seen.extend(events)
    except anthropic.APIStatusError as exc:
        return seen, exc
    return seen, None


def tool_calls(events: list[Any]) -> list[str]:
    return [
        event.content_block.name
        for event in events
        if event.type == "content_block_start" and event.content_block.type == "tool_use"
    ]


def assert_one_error_at_the_end(response: httpx2.Response) -> list[tuple[str, str]]:
    assert response.status_code == 200
    frames = sse_frames(response.text)
    assert [name for name, _ in frames].count("error") == 1
    assert frames[-1][0] == "error"
    assert error_of(frames[-1][1])["type"] == "api_error"
    return frames


# ------------------------------------------------------- names and data types


def renamed(events: list[StreamEvent], name: str) -> list[StreamEvent]:
    return [StreamEvent(name, event.data) for event in events]


@pytest.mark.parametrize("name", ["", "message", "ping"])
def test_the_tool_gate_judges_an_event_by_its_data_type(name: str) -> None:
    block = renamed(tool_use_block(1, "bash", {"command": "ls"}), name)
    events = stream(text_block(0, "let me look"), block, stop_reason="tool_use")
    out = run_stream(BlockToolCalls({"rules": [{"tool": "^bash$"}]}), events)
    assert all("tool_use" not in event.data for event in out)
    assert "blocked a call to tool 'bash'" in out[6].data


@pytest.mark.parametrize("name", ["", "message", "ping"])
def test_text_policies_judge_an_event_by_its_data_type(name: str) -> None:
    events = stream(renamed(text_block(0, "secret-project"), name))
    policy = StringReplace({"replacements": [["secret-project", "[x]"]], "apply_to": "response"})
    out = run_stream(policy, events)
    assert "secret-project" not in "".join(event.data for event in out)


def test_a_nameless_tool_call_never_reaches_the_sdk(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    start, *rest = tool_use_block(0, "bash", {"command": "rm -rf /"})
    frames = [
        frame(message_start()),
        frame(start, name=""),
        *wire(*rest, message_delta("tool_use"), message_stop()),
    ]
    upstream.script(sse_reply(frames))
    events, error = sdk_events(url)
    assert tool_calls(events) == []
    assert error is not None
    assert error.status_code == 200
    assert error.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert [event.type for event in events] == ["message_start"]


@CHAINS
@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}'),
        ("message", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}'),
        ("ping", '{"type":"content_block_start","index":1,"content_block":{"type":"text"}}'),
        ("content_block_delta", '{"type":"ping"}'),
        ("content_block_stop", '{"index":0}'),
        ("content_block_stop", '{"type":7,"index":0}'),
        ("content_block_stop", "not json"),
        ("ping", "[]"),
        ("message", '{"type":""}'),
    ],
    ids=[
        "no-name",
        "default-name",
        "ping-named",
        "ping-typed",
        "no-type",
        "type-not-text",
        "not-json",
        "not-an-object",
        "empty-both",
    ],
)
def test_a_frame_whose_name_is_not_its_type_ends_the_stream_with_one_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chain: str | None, name: str, data: str
) -> None:
    url = make_gateway(policy_config=chain)
    before = [message_start(), *text_block(0, "fine")[:2]]
    odd = f"event: {name}\n" if name else ""
    frames = [*wire(*before), f"{odd}data: {data}\n\n".encode(), *wire(*stream()[2:])]
    upstream.script(sse_reply(frames))
    got = assert_one_error_at_the_end(post_stream(url))
    assert [name for name, _ in got[:-1]] == [event.event for event in before]


@CHAINS
def test_a_mislabelled_first_frame_is_a_502_before_anything_is_sent(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chain: str | None
) -> None:
    url = make_gateway(policy_config=chain)
    upstream.script(sse_reply([frame(message_start(), name=""), *wire(*stream()[1:])]))
    response = post_stream(url)
    assert response.status_code == 502
    assert error_of(response.content)["type"] == "api_error"


@CHAINS
def test_pings_and_unknown_events_whose_name_is_their_type_pass(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chain: str | None
) -> None:
    url = make_gateway(policy_config=chain)
    future = StreamEvent.from_json("future_event", {"type": "future_event", "x": [1]})
    events = [message_start(), ping(), future, *text_block(0, "hi"), ping()]
    events += [message_delta(), message_stop()]
    upstream.script(sse_reply(wire(*events)))
    response = post_stream(url)
    assert response.status_code == 200
    got = sse_frames(response.text)
    assert [(name, json.loads(data)) for name, data in got] == [
        (event.event, event.json) for event in events
    ]


# ------------------------------------------------------- streams cut short


def test_eof_while_the_gate_holds_a_tool_call_is_an_error_for_the_sdk(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    held = tool_use_block(1, "bash", {"command": "ls"})[:-1]
    upstream.script(sse_reply(wire(message_start(), *text_block(0, "let me look"), *held)))
    events, error = sdk_events(url)
    assert error is not None
    assert error.status_code == 200
    assert error.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert tool_calls(events) == []
    assert [event.type for event in events][-1] == "content_block_stop"


@pytest.mark.parametrize(
    "frames",
    [[], wire(*tool_use_block(0, "bash", {"command": "ls"})[:2])],
    ids=["no-event", "only-a-held-tool-call"],
)
def test_eof_before_any_event_reaches_the_client_is_a_502(
    make_gateway: GatewayFactory, upstream: FakeUpstream, frames: list[bytes]
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    upstream.script(sse_reply(frames))
    seen, error = sdk_events(url)
    assert seen == []
    assert error is not None
    assert error.status_code == 502
    assert error.body["error"]["type"] == "api_error"  # type: ignore[index]


def test_a_whole_stream_a_policy_swallowed_is_a_502_not_an_empty_200(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=policy_chain(("tests.support.policies:SwallowStream", {})))
    upstream.script(sse_reply(wire(*stream(text_block(0, "hi")))))
    response = post_stream(url)
    assert response.status_code == 502
    assert error_of(response.content)["type"] == "api_error"


@CHAINS
@pytest.mark.parametrize("kept", [1, 3, 5, 6], ids=lambda n: f"after-{n}")
def test_eof_mid_message_is_an_error_never_a_clean_end(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chain: str | None, kept: int
) -> None:
    url = make_gateway(policy_config=chain)
    events = stream(text_block(0, "half a sentence"))
    upstream.script(sse_reply(wire(*events[:kept])))
    seen, error = sdk_events(url)
    assert error is not None
    assert error.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert [event.type for event in seen] == [e.event for e in events[:kept] if e.event != "ping"]


@CHAINS
def test_an_upstream_error_event_ends_the_stream_as_it_came(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chain: str | None
) -> None:
    url = make_gateway(policy_config=chain)
    overloaded = StreamEvent.from_json(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    )
    upstream.script(sse_reply(wire(message_start(), *text_block(0, "hi")[:2], overloaded)))
    frames = sse_frames(post_stream(url).text)
    assert [name for name, _ in frames].count("error") == 1
    assert error_of(frames[-1][1])["type"] == "overloaded_error"
