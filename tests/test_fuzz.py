"""Property tests: odd request shapes through the policy chain, and arbitrary SSE byte streams
through the decoder, the encoder and the whole stream relay. Nothing crashes, and every frame
the gateway emits is well formed. Example counts stay modest for the CI budget."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from gateway_policies import PolicyContext, StreamEvent, load_chain
from gateway_policies.runtime.sse import SSEDecoder, encode_many
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from policy_gateway.auth.authenticator import PassthroughAuth
from policy_gateway.fallback.budget import from_settings
from policy_gateway.fallback.flag import FallbackFlag
from policy_gateway.fallback.send import Fallback
from policy_gateway.parameter_batch import ParameterBatch
from policy_gateway.policy_source import PolicySource
from policy_gateway.routes.gateway import Gateway
from policy_gateway.routes.messages import MessagesEndpoint
from policy_gateway.settings import Settings
from policy_gateway.upstream.client import UpstreamClient

from .support.client import HEADERS, request_body, sse_frames

pytestmark = pytest.mark.unit

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
TEXT_CHAIN = json.dumps(
    {
        "policies": [
            {
                "policy": "string_replace",
                "options": {"replacements": [["a", "[A]"], ["", "x"]], "apply_to": "both"},
            },
            {"policy": "inject_system_prompt", "options": {"text": "Be kind."}},
            {"policy": "noop"},
        ]
    }
)

# --- request shapes ----------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
BLOCK_TYPES = ["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "x"]
blocks = st.recursive(
    st.fixed_dictionaries(
        {"type": st.sampled_from(BLOCK_TYPES)},
        optional={
            "text": st.text(max_size=12) | json_values,
            "thinking": st.text(max_size=12),
            "signature": st.text(max_size=8),
            "input": json_values,
        },
    )
    | json_values,
    lambda inner: st.fixed_dictionaries(
        {"type": st.just("tool_result"), "content": st.text(max_size=12) | st.lists(inner)}
    ),
    max_leaves=6,
)
contents = st.text(max_size=12) | st.lists(blocks, max_size=4) | json_values
turns = (
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": contents})
    | json_values
)
requests = st.fixed_dictionaries(
    {"model": st.text(max_size=8)},
    optional={
        "messages": st.lists(turns, max_size=4) | json_values,
        "system": st.text(max_size=12) | st.lists(blocks, max_size=3) | json_values,
        "stream": st.booleans(),
        "max_tokens": json_values,
    },
)


def _signed_blocks(request: dict[str, Any]) -> list[Any]:
    """The thinking blocks the API checks signatures of: they must reach it byte-identical."""
    found = []
    messages = request.get("messages")
    for turn in messages if isinstance(messages, list) else []:
        content = turn.get("content") if isinstance(turn, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking"):
                found.append(json.dumps(block))
    return found


@FUZZ
@given(request=requests)
def test_policy_chain_survives_any_request_shape(request: dict[str, Any]) -> None:
    chain = load_chain(TEXT_CHAIN)
    before = copy.deepcopy(request)
    ctx = PolicyContext(endpoint="messages", stream=False, call_id="fuzz")
    anyio.run(chain.apply_request, request, ctx)
    json.dumps(request)
    assert _signed_blocks(request) == _signed_blocks(before)


# --- SSE byte streams --------------------------------------------------------------------

KNOWN_EVENTS = ["message_start", "content_block_delta", "message_stop", "ping", "error"]
names = st.sampled_from(KNOWN_EVENTS) | st.text(
    st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=10
)
texts = st.text(st.characters(blacklist_characters="\r", blacklist_categories=["Cs"]), max_size=30)


@st.composite
def named_events(draw: st.DrawFn) -> tuple[str, str]:
    """A name, and data that is arbitrary text or a JSON object whose type is (mostly) the name."""
    name = draw(names)
    typed = st.builds(lambda kind: json.dumps({"type": kind, "n": 1}), st.just(name) | names)
    return name, draw(typed | texts)


events = st.lists(named_events(), max_size=8)


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[bytes], bool]:
    """(events, the chunks carrying them, whether the stream was truncated).

    Each frame uses one of the three line endings; comment, id and unknown field lines are
    sprinkled in; chunk boundaries fall anywhere, including between a \\r and its \\n.
    """
    sequence = draw(events)
    wire = b""
    for name, data in sequence:
        end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        lines = [draw(st.sampled_from(["", ": keep-alive", "id: 7", "retry: 10", "x-new: y"]))]
        lines.append(f"event: {name}")
        for part in data.split("\n"):
            spaced = part.startswith(" ") or draw(st.booleans())
            lines.append(f"data: {part}" if spaced else f"data:{part}")
        wire += "".join(line + end for line in lines if line).encode() + end.encode()
    truncated = bool(wire) and draw(st.booleans())
    if truncated:
        wire = wire[: draw(st.integers(0, len(wire) - 1))]
    cuts = sorted(draw(st.sets(st.integers(0, len(wire)), max_size=12)))
    chunks = [wire[start:stop] for start, stop in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    return sequence, chunks, truncated


TEXT_PIECES = st.lists(
    st.sampled_from(
        ["a b", "\u00e9", "\x01", "\t", '"', "\\", "\\n", "\\q", "\\u00e9", "\\u00g9", "\\ud800"]
    ),
    max_size=8,
)
NEAR_DELTAS = st.builds(
    lambda index, kind, key, text, tail: (
        f'{{"type":"content_block_delta","index":{index},"delta":{{"type":"{kind}",'
        f'"{key}":"{"".join(text)}{tail}'
    ),
    st.sampled_from(["0", "07", "12", "-1", " 0"]),
    st.sampled_from(["text_delta", "input_json_delta", "ping"]),
    st.sampled_from(["text", "partial_json", "typ\\u0065"]),
    TEXT_PIECES,
    st.sampled_from(
        ['"}}', '"}} ', '"}}x', '"},"type":"content_block_start"}', '"},"typ\\u0065":1}']
    ),
)


def _parsed_type(raw: str) -> str | None:
    try:
        payload = json.loads(raw)
    except ValueError:
        return None
    kind = payload.get("type") if isinstance(payload, dict) else None
    return kind if isinstance(kind, str) else None


@FUZZ
@given(raw=NEAR_DELTAS)
def test_an_events_type_is_what_json_reads_fast_path_or_not(raw: str) -> None:
    # The delta shape the fast path matches, and near misses of it: each reads as json.loads does.
    assert StreamEvent("x", raw).type == _parsed_type(raw)


def _decode(chunks: list[bytes]) -> list[StreamEvent]:
    decoder = SSEDecoder()
    decoded = [event for chunk in chunks for event in decoder.feed(chunk)]
    return decoded + decoder.flush()


@FUZZ
@given(stream=sse_streams())
def test_sse_decoder_and_encoder_round_trip_any_chunking(
    stream: tuple[list[tuple[str, str]], list[bytes], bool],
) -> None:
    sequence, chunks, truncated = stream
    decoded = _decode(chunks)
    if not truncated:
        assert [(event.event, event.data) for event in decoded] == sequence
    encoded = encode_many(decoded)
    assert sse_frames(encoded.decode()) == [(event.event, event.data) for event in decoded]
    assert [(e.event, e.data) for e in _decode([encoded])] == [(e.event, e.data) for e in decoded]


def _is_typed(name: str, data: str) -> bool:
    """Whether a client reads the event as `name`: its data is an object of that type."""
    try:
        payload = json.loads(data)
    except ValueError:
        return False
    return bool(name) and isinstance(payload, dict) and payload.get("type") == name


def _relayed(sequence: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], bool]:
    """The frames relayed as they came, up to the first mislabelled one or the message's end
    (`message_stop` or `error`: stream_grammar lets nothing follow it), and whether the stream
    ended there as the upstream meant it to (nothing after it, no error frame owed)."""
    relayed: list[tuple[str, str]] = []
    for position, (name, data) in enumerate(sequence):
        if not _is_typed(name, data):
            return relayed, False
        relayed.append((name, data))
        if name in ("message_stop", "error"):
            return relayed, position == len(sequence) - 1
    return relayed, False


def _relay(chain: str | None, chunks: list[bytes]) -> httpx2.Response:
    """One streaming call through the real pipeline, the upstream answering with `chunks`."""

    async def upstream_body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def upstream(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=upstream_body()
        )

    config = Settings(upstream_base_url="http://upstream.invalid", upstream_max_retries=0)
    gateway = Gateway(
        config=config,
        upstream=UpstreamClient(config, transport=httpx2.MockTransport(upstream)),
        fallback=Fallback(
            FallbackFlag("unused", ParameterBatch(30, read=lambda names: {})),
            from_settings(config),
        ),
        policies=PolicySource(chain, None),
        auth=PassthroughAuth(),
        upstream_key=None,
    )
    endpoint = MessagesEndpoint(gateway, "messages")

    async def call() -> httpx2.Response:
        async with httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=endpoint), base_url="http://gateway"
        ) as client:
            response = await client.post(
                "/v1/messages", json=request_body(stream=True), headers=HEADERS
            )
        await gateway.upstream.aclose()
        return response

    return anyio.run(call)


def _frames(sequence: list[tuple[str, str]]) -> bytes:
    return "".join(f"event: {name}\ndata: {data}\n\n" for name, data in sequence).encode()


AFTER_THE_END = [
    ("error", json.dumps({"type": "error", "n": 1})),
    ("message_start", json.dumps({"type": "message_start", "n": 1})),
]
"""An event after an `error` (found by this test): the relay ends the stream with its own."""


@pytest.mark.parametrize("chain", [None, TEXT_CHAIN], ids=["no-policies", "text-policies"])
@FUZZ
@given(stream=sse_streams())
@example(stream=(AFTER_THE_END, [_frames(AFTER_THE_END)], False))
def test_relay_never_crashes_nor_emits_malformed_sse(
    chain: str | None, stream: tuple[list[tuple[str, str]], list[bytes], bool]
) -> None:
    sequence, chunks, truncated = stream
    response = _relay(chain, chunks)
    if response.headers["content-type"].startswith("application/json"):
        # Refused before any event: nothing arrived (502), or a policy could not read the
        # first event and failed closed (500). Either way Anthropic-shaped, never a crash.
        assert response.status_code in ((502,) if chain is None else (500, 502))
        assert response.json()["type"] == "error"
        return
    assert response.status_code == 200
    frames = sse_frames(response.text)
    if chain is None and not truncated:
        relayed, ended = _relayed(sequence)
        assert relayed
        if ended:
            assert frames == relayed
        else:
            assert frames[:-1] == relayed
            assert frames[-1][0] == "error"
            assert json.loads(frames[-1][1])["error"]["type"] == "api_error"
    # Never a clean end the upstream did not send.
    assert any(name in ("message_stop", "error") for name, _ in frames)
