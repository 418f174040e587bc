"""The relay holds every stream to the order the SDKs assemble a message by.

The SDKs assemble, they do not check: the snapshot is message_start's
message, content included; each content_block_start is appended wherever its
index points; a delta lands on the block its index names, stopped or not. Two
hostile framings once took `rm -rf /` past block_tool_calls that way: an
input_json_delta after its block's content_block_stop, and a tool_use start
already carrying its input followed by an empty delta (judged as {}, kept as
the start's input by the Python SDK). A stream out of order now ends with one
error, policies or none, and the tool gate judges every input an SDK can make
of a call.

The grammar alone, then the official Python SDK (tests/test_ts_client.py: the
TypeScript SDK) through the real gateway and a fake upstream sending the
framings, then a fuzzer: for every stream the gate lets through, each tool
call the Python SDK assembles has the input the gate judged.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.lib.streaming._beta_messages import accumulate_event as accumulate_beta
from anthropic.lib.streaming._messages import accumulate_event
from gateway_policies import PolicyContext, StreamEvent
from gateway_policies.runtime.stream_grammar import GrammarError, StreamGrammar
from gateway_policies.testing import (
    event,
    message_delta,
    message_start,
    message_stop,
    ping,
    run_stream,
    text_block,
)
from gateway_policies.tool_gate import ToolCallGate
from gateway_policies.tool_input import canonical_input
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .support.client import error_of, sse_frames
from .support.fake_upstream import MODEL, FakeUpstream
from .support.framings import (
    CITATION,
    DELTA_AFTER_STOP,
    FRAMINGS,
    GATE_RM,
    GOOD,
    INPUT_AT_START,
    RM,
    TEXT,
    THINKING,
    call,
    delta,
    partial,
    post_stream,
    sse_reply,
    start,
    stop,
    wire,
)
from .support.gateway import GatewayFactory
from .support.sdk import sdk
from .support.tool_calls import TOOLS

CHAINS = pytest.mark.parametrize("chain", [None, GATE_RM], ids=["no-policies", "tool-gate"])
OPENED = [message_start(), TEXT]
PREFILLED = {
    **message_start().json["message"],
    "content": [{"type": "tool_use", "id": "toolu_0", "name": "bash", "input": RM}],
}
# Each stream breaks the grammar at its last event, and only there.
BROKEN: dict[str, list[StreamEvent]] = {
    "ping-first": [ping()],
    "block-first": [TEXT],
    "content-in-message-start": [event({"type": "message_start", "message": PREFILLED})],
    "message-start-twice": [message_start(), message_start()],
    "index-skipped": [message_start(), start(1, {"type": "text", "text": ""})],
    "index-true": [message_start(), *text_block(0, "a"), start(True, {"type": "text", "text": ""})],
    "index-float": [message_start(), start(0.0, {"type": "text", "text": ""})],
    "start-while-open": [*OPENED, start(1, {"type": "text", "text": ""})],
    "delta-after-stop": DELTA_AFTER_STOP[:4],
    "delta-for-another-block": [*OPENED, delta(1, {"type": "text_delta", "text": "x"})],
    "stop-for-another-block": [*OPENED, stop(1)],
    "stop-twice": [*OPENED, stop(0), stop(0)],
    "text-delta-on-a-call": [
        message_start(),
        call(0),
        delta(0, {"type": "text_delta", "text": "x"}),
    ],
    "input-delta-on-text": [*OPENED, partial(0, json.dumps(RM))],
    "thinking-delta-on-text": [*OPENED, delta(0, {"type": "thinking_delta", "thinking": "x"})],
    "signature-delta-on-text": [*OPENED, delta(0, {"type": "signature_delta", "signature": "s"})],
    "citation-on-thinking": [
        message_start(),
        THINKING,
        delta(0, {"type": "citations_delta", "citation": CITATION}),
    ],
    "partial-json-not-a-string": [message_start(), call(0), partial(0, 7)],
    "text-delta-without-text": [*OPENED, delta(0, {"type": "text_delta", "partial_json": "x"})],
    "message-delta-while-open": [*OPENED, message_delta()],
    "after-message-stop": [message_start(), message_delta(), message_stop(), ping()],
    "second-message": [message_start(), message_delta(), message_stop(), message_start()],
}
# ------------------------------------------------------------- the grammar alone


def checked(events: list[StreamEvent]) -> StreamGrammar:
    grammar = StreamGrammar()
    for item in events:
        grammar.check(item, str(item.type))
    return grammar


@pytest.mark.unit
@pytest.mark.parametrize("events", BROKEN.values(), ids=BROKEN.keys())
def test_a_stream_out_of_order_breaks_the_grammar_at_the_first_wrong_event(
    events: list[StreamEvent],
) -> None:
    grammar = checked(events[:-1])
    with pytest.raises(GrammarError):
        grammar.check(events[-1], str(events[-1].type))


@pytest.mark.unit
def test_every_kind_of_block_delta_and_unknown_event_the_api_sends_keeps_the_grammar() -> None:
    assert checked(GOOD).ended


@pytest.mark.unit
def test_an_error_may_come_first_or_mid_stream_and_ends_it() -> None:
    overloaded = event({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    assert checked([overloaded]).ended
    assert checked([*OPENED, overloaded]).ended
    with pytest.raises(GrammarError):
        checked([*OPENED, overloaded, stop(0)])


@pytest.mark.unit
def test_a_delta_in_the_apis_compact_form_is_checked_like_any_other() -> None:
    compact = StreamEvent(
        "content_block_delta",
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}',
    )
    checked([*OPENED, compact])
    with pytest.raises(GrammarError):
        checked([message_start(), call(0), compact])
    with pytest.raises(GrammarError):
        checked([*OPENED, stop(0), compact])


# ------------------------------------------------------- through the real gateway


def python_sdk_inputs(url: str) -> tuple[list[Any], anthropic.APIStatusError | None]:
    """Every tool_use input the SDK's snapshot held after any event, and its error, if any."""
    inputs: list[Any] = []
    try:
        with sdk(url).messages.stream(
            model=MODEL,
            max_tokens=64,
            tools=TOOLS,
            messages=[{"role": "user", "content": "run it"}],
        ) as events:
            for _ in events:
                snapshot = events.current_message_snapshot
                inputs += [b.input for b in snapshot.content if b.type == "tool_use"]
    except anthropic.APIStatusError as exc:
        return inputs, exc
    return inputs, None


@FRAMINGS
def test_the_hostile_framings_never_bring_the_python_sdk_a_blocked_input(
    make_gateway: GatewayFactory, upstream: FakeUpstream, events: list[StreamEvent]
) -> None:
    url = make_gateway(policy_config=GATE_RM)
    upstream.script(sse_reply(wire(*events)))
    inputs, _ = python_sdk_inputs(url)
    assert all("rm -rf" not in canonical_input(value) for value in inputs), inputs


def test_a_call_whose_input_came_with_its_start_is_judged_by_it(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=GATE_RM)
    upstream.script(sse_reply(wire(*INPUT_AT_START)))
    with sdk(url).messages.stream(
        model=MODEL, max_tokens=64, tools=TOOLS, messages=[{"role": "user", "content": "go"}]
    ) as events:
        message = events.get_final_message()
    assert message.stop_reason == "end_turn"
    assert [block.type for block in message.content] == ["text"]


@CHAINS
@pytest.mark.parametrize("events", BROKEN.values(), ids=BROKEN.keys())
def test_a_stream_out_of_order_ends_with_one_error_policies_or_none(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    chain: str | None,
    events: list[StreamEvent],
) -> None:
    url = make_gateway(policy_config=chain)
    upstream.script(sse_reply(wire(*events, *events[-1:], message_delta(), message_stop())))
    response = post_stream(url)
    if len(events) == 1:
        # Nothing reached the client: the error comes as itself, with its status.
        assert response.status_code == 502
        assert error_of(response.content)["type"] == "api_error"
        return
    assert response.status_code == 200
    frames = sse_frames(response.text)
    assert [name for name, _ in frames].count("error") == 1
    assert frames[-1][0] == "error"
    assert error_of(frames[-1][1])["type"] == "api_error"
    if chain is None:
        assert response.content.startswith(b"".join(wire(*events[:-1])))


@CHAINS
def test_a_stream_in_order_is_relayed_byte_for_byte(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chain: str | None
) -> None:
    url = make_gateway(policy_config=chain)
    sent = wire(*GOOD)
    upstream.script(sse_reply(sent))
    response = post_stream(url)
    assert response.status_code == 200
    assert response.content == b"".join(sent)


# ------------------------------------------------------------------- the fuzzer


class JudgedInputs(ToolCallGate):
    """A tool gate that keeps every input it judges, by tool; it blocks any input holding "rm"."""

    name = "judged_inputs"

    def __init__(self) -> None:
        super().__init__()
        self.judged: dict[str, list[str]] = {}

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> str | None:
        text = canonical_input(tool_input)
        self.judged.setdefault(tool, []).append(text)
        return "it removes files" if "rm" in text else None


INPUTS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}),
    st.just(RM),
    st.dictionaries(
        st.sampled_from(["command", "path", "rm"]),
        st.one_of(st.sampled_from(["ls", "rm -rf /", ""]), st.integers(), st.booleans()),
        max_size=2,
    ),
)
CALL_KINDS = ["tool_use", "server_tool_use", "mcp_tool_use"]


@st.composite
def block_events(draw: st.DrawFn, index: int) -> list[StreamEvent]:
    """One block as the API frames it, or with its input at the start, empty partials and all."""
    kind = draw(st.sampled_from(["text", "thinking", *CALL_KINDS]))
    if kind == "text":
        return text_block(index, *draw(st.lists(st.text(max_size=5), max_size=2)))
    if kind == "thinking":
        body = {"type": "thinking_delta", "thinking": draw(st.text(max_size=5))}
        return [
            THINKING.with_json({**THINKING.json, "index": index}),
            delta(index, body),
            stop(index),
        ]
    first = call(index, draw(INPUTS), kind=kind, name=f"tool{index}")
    raw = "" if draw(st.booleans()) else json.dumps(draw(INPUTS))
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=3)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    partials = [partial(index, piece) for piece in pieces] if draw(st.booleans()) else []
    return [first, *partials, stop(index)]


@st.composite
def hostile_streams(draw: st.DrawFn) -> list[StreamEvent]:
    """A stream of a few blocks, then a few events slipped in anywhere: the framings an
    upstream could send, in order or not."""
    count = draw(st.integers(0, 3))
    events = [message_start()]
    for index in range(count):
        events += draw(block_events(index))
    events += [message_delta("tool_use"), message_stop()]
    strays = st.one_of(
        st.builds(partial, st.integers(0, count), st.sampled_from(['{"command": "rm -rf /"}', ""])),
        st.builds(stop, st.integers(0, count)),
        st.builds(lambda i, v: call(i, v, name=f"tool{i}"), st.integers(0, count), INPUTS),
        st.just(event({"type": "message_start", "message": PREFILLED})),
        st.just(ping()),
    )
    for position, stray in draw(
        st.lists(st.tuples(st.integers(0, len(events)), strays), max_size=3)
    ):
        events.insert(position, stray)
    return events


def admitted(events: list[StreamEvent]) -> list[StreamEvent]:
    """What the relay hands the policies: the events before the first out of order."""
    grammar = StreamGrammar()
    for position, item in enumerate(events):
        try:
            grammar.check(item, str(item.type))
        except GrammarError:
            return events[:position]
    return events


def sdk_calls(events: list[StreamEvent]) -> list[tuple[str, Any]]:
    """The tool calls the Python SDK's snapshots hold, plain and beta, up to where it raises."""
    calls: list[tuple[str, Any]] = []
    for beta in (False, True):
        snapshot: Any = None
        buffers: dict[int, bytes] = {}
        for item in events:
            if item.type == "ping":
                continue  # the SDK's stream drops pings by name
            try:
                if beta:
                    snapshot = accumulate_beta(
                        event=item.json,  # type: ignore[arg-type]
                        current_snapshot=snapshot,
                        json_bufs=buffers,
                        request_headers=httpx2.Headers(),
                    )
                else:
                    snapshot = accumulate_event(
                        event=item.json,  # type: ignore[arg-type]
                        current_snapshot=snapshot,
                        json_bufs=buffers,
                    )
            except Exception:
                break
        blocks = [] if snapshot is None else snapshot.content
        calls += [(b.name, b.input) for b in blocks if b.type in CALL_KINDS]
    return calls


@pytest.mark.unit
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_streams())
def test_every_call_the_sdk_assembles_is_one_the_gate_judged(events: list[StreamEvent]) -> None:
    gate = JudgedInputs()
    delivered = run_stream(gate, admitted(events))
    for tool, tool_input in sdk_calls(delivered):
        assert canonical_input(tool_input) in gate.judged.get(tool, []), (tool, tool_input)
        assert "rm" not in canonical_input(tool_input)
