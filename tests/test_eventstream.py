"""The event-stream decoder alone: any chunking, both checksums, every header type.

Frames are built by the module's encoder and, independently, checked against
botocore's own decoder, so the two sides cannot share a mistake unnoticed.
"""

from __future__ import annotations

import itertools
import struct
import time
import uuid
from typing import Any
from zlib import crc32

import pytest
from botocore.eventstream import EventStreamBuffer
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_gateway.upstream.bedrock.eventstream import (
    MAX_HEADERS_LENGTH,
    MAX_PAYLOAD_LENGTH,
    EventStreamDecoder,
    EventStreamError,
    Message,
    encode_message,
)

pytestmark = pytest.mark.unit

HEADERS = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
MESSAGES = [
    encode_message(HEADERS, b'{"bytes":"eyJ0eXBlIjoicGluZyJ9"}'),
    encode_message({":message-type": "event", ":event-type": "chunk"}, b""),
    encode_message(HEADERS, "ünïcode ✓".encode() * 50),
    encode_message({}, b"x" * 70_000),
]
STREAM = b"".join(MESSAGES)


def decode(chunks: list[bytes]) -> list[Message]:
    decoder = EventStreamDecoder()
    out = [message for chunk in chunks for message in decoder.feed(chunk)]
    decoder.finish()
    return out


def expected() -> list[tuple[dict[str, object], bytes]]:
    """The same stream, decoded by botocore."""
    buffer = EventStreamBuffer()
    buffer.add_data(STREAM)
    # botocore-stubs types `headers` as an int; it is the dict the decoder built.
    messages: list[Any] = list(buffer)
    return [(dict(message.headers), message.payload) for message in messages]


def test_whole_stream_decodes_as_botocore_decodes_it() -> None:
    got = decode([STREAM])
    assert [(m.headers, m.payload) for m in got] == expected()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 12, 13, 16, 100, 4096])
def test_every_fixed_chunk_size(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert [(m.headers, m.payload) for m in decode(chunks)] == expected()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=40))
def test_any_chunking(cuts: list[int]) -> None:
    points = sorted({0, len(STREAM), *cuts})
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert [(m.headers, m.payload) for m in decode(chunks)] == expected()


def test_messages_arrive_as_soon_as_they_are_complete() -> None:
    decoder = EventStreamDecoder()
    first = MESSAGES[0]
    assert decoder.feed(first[:-1]) == []
    (message,) = decoder.feed(first[-1:] + MESSAGES[1][:5])
    assert message.payload == b'{"bytes":"eyJ0eXBlIjoicGluZyJ9"}'
    assert message.message_type == "event"


def test_bad_message_checksum_raises_with_the_intact_messages_before_it() -> None:
    bad = bytearray(MESSAGES[2])
    bad[20] ^= 1
    decoder = EventStreamDecoder()
    with pytest.raises(EventStreamError, match="message checksum") as caught:
        decoder.feed(MESSAGES[0] + MESSAGES[1] + bytes(bad))
    assert [m.payload for m in caught.value.decoded] == [
        b'{"bytes":"eyJ0eXBlIjoicGluZyJ9"}',
        b"",
    ]


def test_bad_prelude_checksum_is_caught_before_trusting_the_lengths() -> None:
    bad = bytearray(MESSAGES[0])
    bad[3] ^= 0x80  # the total length, now claiming ~2 GB
    with pytest.raises(EventStreamError, match="prelude checksum"):
        EventStreamDecoder().feed(bytes(bad))


def test_lengths_beyond_the_limits_are_refused_without_buffering() -> None:
    head = struct.pack(">II", MAX_PAYLOAD_LENGTH + 100, 0)
    prelude = head + struct.pack(">I", crc32(head))
    with pytest.raises(EventStreamError, match="invalid prelude lengths"):
        EventStreamDecoder().feed(prelude)


@pytest.mark.parametrize(
    ("total", "headers_length"),
    [
        (12 + MAX_PAYLOAD_LENGTH + 4 + 1, 0),
        (12 + MAX_HEADERS_LENGTH + 1 + 4, MAX_HEADERS_LENGTH + 1),
        (12 + 100 + 4 - 1, 100),
    ],
    ids=["payload-too-long", "headers-too-long", "headers-past-the-total"],
)
def test_an_impossible_prelude_fails_as_soon_as_its_twelve_bytes_are_in(
    total: int, headers_length: int
) -> None:
    # Trickled a byte at a time: the decoder refuses on the prelude itself,
    # before it would hold (or wait for) any of the announced message.
    head = struct.pack(">II", total, headers_length)
    prelude = head + struct.pack(">I", crc32(head))
    decoder = EventStreamDecoder()
    for byte in prelude[:-1]:
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(EventStreamError, match="invalid prelude lengths"):
        decoder.feed(prelude[-1:])
    decoder.finish()  # the error dropped what was held


def test_a_large_message_trickled_in_costs_time_linear_in_its_size() -> None:
    # 12 MB in 2 KB chunks: copying everything held on each chunk (the old
    # decoder) moves ~37 GB and takes seconds; buffering in place is linear.
    payload = bytes(range(256)) * (12 * 1024 * 1024 // 256)
    frame = encode_message(HEADERS, payload)
    chunks = [frame[i : i + 2048] for i in range(0, len(frame), 2048)]
    decoder = EventStreamDecoder()
    started = time.process_time()
    decoded = [message for chunk in chunks for message in decoder.feed(chunk)]
    spent = time.process_time() - started
    decoder.finish()
    assert [m.payload == payload for m in decoded] == [True]
    assert spent < 1.0, f"{spent:.2f} s of CPU for one trickled 12 MB message"


def test_messages_after_a_held_one_still_decode_in_the_same_chunk() -> None:
    # A chunk that ends the held message and carries more: the held buffer
    # is trimmed by what was decoded, the rest kept for the next chunk.
    decoder = EventStreamDecoder()
    big = MESSAGES[3]
    assert decoder.feed(big[:1000]) == []
    got = decoder.feed(big[1000:] + MESSAGES[0] + MESSAGES[1][:20])
    assert [m.payload for m in got] == [b"x" * 70_000, b'{"bytes":"eyJ0eXBlIjoicGluZyJ9"}']
    (last,) = decoder.feed(MESSAGES[1][20:])
    assert last.payload == b""
    decoder.finish()


def test_a_stream_cut_inside_a_message_is_an_error_at_the_end() -> None:
    decoder = EventStreamDecoder()
    assert len(decoder.feed(MESSAGES[0] + MESSAGES[1][:7])) == 1
    with pytest.raises(EventStreamError, match="7 bytes left over"):
        decoder.finish()


def _header(name: str, kind: int, value: bytes) -> bytes:
    return bytes([len(name)]) + name.encode() + bytes([kind]) + value


def _frame(headers: bytes, payload: bytes = b"{}") -> bytes:
    total = 12 + len(headers) + len(payload) + 4
    head = struct.pack(">II", total, len(headers))
    body = head + struct.pack(">I", crc32(head)) + headers + payload
    return body + struct.pack(">I", crc32(body))


def test_every_header_value_type() -> None:
    ident = uuid.uuid4().bytes
    headers = b"".join(
        [
            _header("t", 0, b""),
            _header("f", 1, b""),
            _header("byte", 2, b"\x07"),
            _header("short", 3, struct.pack(">h", -2)),
            _header("int", 4, struct.pack(">i", 70000)),
            _header("long", 5, struct.pack(">q", 2**40)),
            _header("bytes", 6, struct.pack(">H", 3) + b"\x00\x01\x02"),
            _header(":message-type", 7, struct.pack(">H", 9) + b"exception"),
            _header("time", 8, struct.pack(">q", 1_700_000_000_000)),
            _header("uuid", 9, ident),
        ]
    )
    (message,) = decode([_frame(headers)])
    assert message.headers["t"] is True
    assert message.headers["f"] is False
    assert message.headers["bytes"] == b"\x00\x01\x02"
    assert message.headers["uuid"] == ident
    assert message.headers["int"] == struct.pack(">i", 70000)
    assert message.message_type == "exception"


@pytest.mark.parametrize(
    "headers",
    [
        _header("x", 42, b""),  # unknown type
        _header("x", 7, struct.pack(">H", 50) + b"short"),  # string longer than the headers
        _header("x", 5, b"\x00\x01"),  # long cut short
        b"\x09ab",  # name runs past the end
    ],
    ids=["unknown-type", "string-overrun", "fixed-overrun", "name-overrun"],
)
def test_malformed_headers_are_an_error(headers: bytes) -> None:
    with pytest.raises(EventStreamError):
        decode([_frame(headers)])
