"""The SSE wire format (gateway_policies.runtime.sse), alone: decoding edge cases, the encoder."""

from __future__ import annotations

import time

import pytest
from gateway_policies import StreamEvent
from gateway_policies.runtime.sse import EventTooLarge, SSEDecoder, encode, encode_many

pytestmark = pytest.mark.unit


def decode(*chunks: bytes) -> list[tuple[str, str]]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return [(event.event, event.data) for event in [*events, *decoder.flush()]]


def test_the_messages_api_shape() -> None:
    assert decode(b'event: ping\ndata: {"type": "ping"}\n\n') == [("ping", '{"type": "ping"}')]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(ending: bytes) -> None:
    def frame(name: bytes) -> bytes:
        return b"event: " + name + ending + b"data: 1" + ending + ending

    assert decode(frame(b"a") + frame(b"b")) == [("a", "1"), ("b", "1")]


def test_a_crlf_split_between_two_chunks_is_one_line_ending() -> None:
    assert decode(b"event: a\r", b"\ndata: 1\r", b"\n\r", b"\n") == [("a", "1")]


def test_byte_by_byte_equals_all_at_once() -> None:
    wire = b"event: a\r\ndata: x\r\n\r\n: comment\n\nevent: b\ndata: y\ndata: z\n\n"
    assert decode(*(wire[i : i + 1] for i in range(len(wire)))) == decode(wire)


def test_a_multibyte_character_split_between_chunks_survives() -> None:
    wire = "event: a\ndata: ☃\n\n".encode()
    cut = wire.index("☃".encode()) + 1
    assert decode(wire[:cut], wire[cut:]) == [("a", "☃")]


def test_data_lines_join_with_newlines_and_one_leading_space_goes() -> None:
    assert decode(b"event: a\ndata:one\ndata:  two\ndata\n\n") == [("a", "one\n two\n")]


def test_comments_unknown_fields_and_frames_without_data_are_dropped() -> None:
    wire = b": keep-alive\n\nid: 7\nretry: 100\nevent: a\ndata: 1\n\nevent: only-a-name\n\n"
    assert decode(wire) == [("a", "1")]


def test_a_frame_without_an_event_line_has_no_name() -> None:
    # Not SSE's default "message": the relay must see the name is missing to refuse it.
    assert decode(b"data: 1\n\n") == [("", "1")]


def test_flush_returns_a_final_frame_without_its_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: a\ndata: 1") == []
    assert [(e.event, e.data) for e in decoder.flush()] == [("a", "1")]
    assert decoder.flush() == []


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert decode(b"event: a\ndata: \xff\n\n") == [("a", "\ufffd")]


def test_encode_keeps_the_event_line_and_splits_multiline_data() -> None:
    assert (
        encode(StreamEvent("a", "x\r\ny\rz\nw"))
        == b"event: a\ndata: x\ndata: y\ndata: z\ndata: w\n\n"
    )


def test_encode_many_is_the_frames_in_order() -> None:
    events = [StreamEvent("a", "1"), StreamEvent.from_json("b", {"k": "☃"})]
    assert encode_many(events) == b'event: a\ndata: 1\n\nevent: b\ndata: {"k":"\xe2\x98\x83"}\n\n'
    assert encode_many([]) == b""


@pytest.mark.parametrize("data", ["plain", "two\nlines", "", "trailing\n", '{"a": [1, 2]}'])
def test_encode_then_decode_is_the_identity(data: str) -> None:
    (decoded,) = decode(encode(StreamEvent("e", data)))
    assert decoded == ("e", data)


def test_a_large_event_trickled_in_costs_time_linear_in_its_size() -> None:
    # 16 MB in 4 KB chunks: rescanning everything held on each chunk (the old
    # decoder) walks ~32 GB and takes tens of seconds; scanning each chunk once is linear.
    data = b'{"type": "content_block_delta", "text": "' + b"y" * (16 * 1024 * 1024) + b'"}'
    frame = b"event: content_block_delta\ndata: " + data + b"\n\n"
    decoder = SSEDecoder(max_event_bytes=32 * 1024 * 1024)
    started = time.process_time()
    events = [e for i in range(0, len(frame), 4096) for e in decoder.feed(frame[i : i + 4096])]
    spent = time.process_time() - started
    assert [len(event.data) for event in events] == [len(data)]
    assert spent < 1.0, f"{spent:.2f} s of CPU for one trickled 16 MB event"


def test_an_event_past_the_limit_is_refused_as_soon_as_that_much_is_held() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    assert decoder.feed(b"event: a\ndata: " + b"x" * 900) == []
    with pytest.raises(EventTooLarge):
        decoder.feed(b"x" * 200)


def test_an_event_past_the_limit_is_refused_when_it_arrives_whole() -> None:
    small = b"event: a\ndata: 1\n\n"
    with pytest.raises(EventTooLarge):
        SSEDecoder(max_event_bytes=1000).feed(small + b"event: b\ndata: " + b"x" * 2000 + b"\n\n")


def test_events_within_the_limit_in_one_large_chunk_all_decode() -> None:
    frames = b"event: a\ndata: " + b"x" * 500 + b"\n\n"
    events = SSEDecoder(max_event_bytes=1000).feed(frames * 100)
    assert len(events) == 100
