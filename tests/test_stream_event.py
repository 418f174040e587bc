"""What a stream policy changed is what the client receives: in a policy's own tests
(gateway_policies.testing, through the real SSE encoder and decoder) and through the gateway."""

from __future__ import annotations

import pytest
from gateway_policies import Policy, PolicyContext, StreamEvent
from gateway_policies.runtime.sse import encode
from gateway_policies.testing import assemble, decode, run_stream, stream, text_block

from .support.client import policy_chain
from .support.fake_upstream import FakeUpstream, Reply, text_events
from .support.gateway import GatewayFactory
from .support.policies import ShoutInPlace
from .support.sdk import sdk

# Spaced as the upstream may space it: a re-serialization would change the bytes.
UPSTREAM_DATA = (
    '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}'
)


def test_an_event_nobody_parsed_goes_out_as_the_upstream_wrote_it() -> None:
    event = StreamEvent("content_block_delta", UPSTREAM_DATA)
    assert encode(event) == f"event: content_block_delta\ndata: {UPSTREAM_DATA}\n\n".encode()


def test_an_event_read_but_unchanged_keeps_the_upstreams_bytes() -> None:
    event = StreamEvent("content_block_delta", UPSTREAM_DATA)
    assert event.json["delta"]["text"] == "hi"
    assert event.data == UPSTREAM_DATA


def test_an_in_place_edit_is_what_goes_on_the_wire() -> None:
    event = StreamEvent("content_block_delta", UPSTREAM_DATA)
    event.json["delta"]["text"] = "HI ☃"
    (decoded,) = decode(encode(event))
    assert decoded.event == "content_block_delta"
    assert decoded.json["delta"]["text"] == "HI ☃"
    assert event.data == decoded.data


def test_with_json_makes_a_new_event_and_leaves_the_old_one() -> None:
    event = StreamEvent("content_block_delta", UPSTREAM_DATA)
    changed = event.with_json({"type": "content_block_delta", "index": 0, "delta": {}})
    assert changed.event == "content_block_delta"
    assert changed.json["delta"] == {}
    assert event.data == UPSTREAM_DATA


def test_name_and_data_are_read_only() -> None:
    event = StreamEvent("ping", '{"type": "ping"}')
    with pytest.raises(AttributeError):
        event.data = "{}"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        event.event = "other"  # type: ignore[misc]


@pytest.mark.parametrize("data", ["[1, 2]", '"text"', "not json", ""])
def test_data_that_is_not_a_json_object_has_no_payload(data: str) -> None:
    event = StreamEvent("future_event", data)
    assert event.payload is None
    with pytest.raises(ValueError, match=r"JSON|Expecting|Extra|not a JSON object"):
        _ = event.json
    assert event.data == data


def test_run_stream_shows_an_in_place_edit_as_a_client_sees_it() -> None:
    out = run_stream(ShoutInPlace(), stream(text_block(0, "hello ", "world")))
    assert assemble(out)["content"] == [{"type": "text", "text": "HELLO WORLD"}]


def test_run_stream_does_not_show_an_edit_made_after_the_event_left() -> None:
    class EditsLate(Policy):
        def __init__(self) -> None:
            super().__init__()
            self.sent: list[StreamEvent] = []

        async def on_stream_event(
            self, event: StreamEvent, ctx: PolicyContext
        ) -> list[StreamEvent]:
            for earlier in self.sent:
                delta = earlier.json.get("delta")
                if isinstance(delta, dict) and "text" in delta:
                    delta["text"] = "too late"
            self.sent.append(event)
            return [event]

    out = run_stream(EditsLate(), stream(text_block(0, "a", "b")))
    assert assemble(out)["content"] == [{"type": "text", "text": "ab"}]


def test_an_in_place_edit_reaches_the_sdk_through_the_gateway(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=policy_chain(("tests.support.policies:ShoutInPlace", {})))
    upstream.script(Reply(events=text_events(["quiet ", "words"])))
    with sdk(url).messages.stream(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as events:
        assert events.get_final_text() == "QUIET WORDS"
