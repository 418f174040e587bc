"""AWS event-stream framing (application/vnd.amazon.eventstream), decoded incrementally.

Bedrock's InvokeModelWithResponseStream answers in this binary framing, not
SSE. Each message is: a 12-byte prelude (total length, headers length, both
big-endian uint32, and the CRC32 of those 8 bytes), the headers, the payload,
and the CRC32 of everything before it. Messages may be split anywhere across
network chunks; both checksums are verified before a message is handed on, so
a corrupted frame is an error, never bytes passed to the client.
"""

from __future__ import annotations

import struct
from zlib import crc32

PRELUDE_LENGTH = 12
# Limits botocore applies to the same framing: a length beyond them means the
# stream is corrupt, and buffering up to it would only hold memory hostage.
MAX_HEADERS_LENGTH = 128 * 1024
MAX_PAYLOAD_LENGTH = 24 * 1024 * 1024

_PRELUDE = struct.Struct(">III")
_UINT16 = struct.Struct(">H")
_UINT32 = struct.Struct(">I")
_KNOWN_HEADERS = 32
# Header value type → fixed size in bytes; types 6 (bytes) and 7 (string) carry
# a uint16 length instead.
_FIXED_SIZES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_BYTES, _STRING = 6, 7


class EventStreamError(Exception):
    """The byte stream is not valid event-stream framing (a bad checksum, length or header)."""

    decoded: list[Message]
    """The intact messages of the same chunk before the failure."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.decoded = []


class Message:
    """One decoded message: its headers (string values as str, others as raw bytes) and payload.

    `headers` may be shared with other messages that had the same header bytes:
    read it, never change it.
    """

    __slots__ = ("headers", "payload")

    def __init__(self, headers: dict[str, str | bytes | bool], payload: bytes) -> None:
        self.headers = headers
        self.payload = payload

    @property
    def message_type(self) -> str | bytes | bool:
        return self.headers.get(":message-type", "event")


class EventStreamDecoder:
    """Turns bytes, chunked in any way, into verified Messages."""

    def __init__(self) -> None:
        # The bytes of a message not yet complete. A chunk is appended in
        # place (amortized O(len(chunk))) and a decoded message dropped from
        # the front in O(1): a large message trickled in costs time linear in
        # its size, never one copy of everything so far per chunk.
        self._pending = bytearray()
        # A stream repeats the same few header blocks (`chunk` event, JSON):
        # each distinct block is parsed once.
        self._known_headers: dict[bytes, dict[str, str | bytes | bool]] = {}

    def feed(self, chunk: bytes) -> list[Message]:
        """Every message `chunk` completes; EventStreamError at the first corrupt one.

        The error carries the intact messages before it (`decoded`), so a
        caller relays them before reporting the failure.
        """
        pending = self._pending
        if pending:
            pending += chunk
            data: bytes | bytearray = pending
        else:
            # Nothing held: the chunk is read in place, and only its
            # incomplete tail is kept.
            data = chunk
        try:
            with memoryview(data) as view:
                messages, offset = self._decode(data, view)
        except EventStreamError:
            self._pending = bytearray()
            raise
        if data is pending:
            del pending[:offset]
        elif offset < len(data):
            pending += memoryview(data)[offset:]
        return messages

    def _decode(self, data: bytes | bytearray, view: memoryview) -> tuple[list[Message], int]:
        size = len(data)
        offset = 0
        messages: list[Message] = []
        try:
            while size - offset >= PRELUDE_LENGTH:
                total, headers_length, prelude_crc = _PRELUDE.unpack_from(data, offset)
                if crc32(view[offset : offset + 8]) != prelude_crc:
                    raise EventStreamError("prelude checksum mismatch")
                payload_length = total - headers_length - PRELUDE_LENGTH - 4
                # Checked as soon as the prelude is in, before a byte of the
                # message is held: a length past the limits is a corrupt stream.
                if headers_length > MAX_HEADERS_LENGTH or not (
                    0 <= payload_length <= MAX_PAYLOAD_LENGTH
                ):
                    raise EventStreamError(f"invalid prelude lengths {total}, {headers_length}")
                if size - offset < total:
                    break
                end = offset + total - 4
                if crc32(view[offset + 8 : end], prelude_crc) != _UINT32.unpack_from(data, end)[0]:
                    raise EventStreamError("message checksum mismatch")
                headers_end = offset + PRELUDE_LENGTH + headers_length
                raw_headers = bytes(view[offset + PRELUDE_LENGTH : headers_end])
                headers = self._known_headers.get(raw_headers)
                if headers is None:
                    headers = _parse_headers(raw_headers)
                    if len(self._known_headers) < _KNOWN_HEADERS:
                        self._known_headers[raw_headers] = headers
                messages.append(Message(headers, bytes(view[headers_end:end])))
                offset += total
        except EventStreamError as exc:
            exc.decoded = messages
            raise
        return messages, offset

    def finish(self) -> None:
        """The stream ended: bytes of an incomplete message left over mean it was cut short."""
        if self._pending:
            left = len(self._pending)
            self._pending = bytearray()
            raise EventStreamError(f"stream ended inside a message ({left} bytes left over)")


def _parse_headers(data: bytes) -> dict[str, str | bytes | bool]:
    headers: dict[str, str | bytes | bool] = {}
    position = 0
    try:
        while position < len(data):
            name_length = data[position]
            name = data[position + 1 : position + 1 + name_length].decode("utf-8")
            position += 1 + name_length
            kind = data[position]
            position += 1
            value: str | bytes | bool
            if kind in (_BYTES, _STRING):
                (length,) = _UINT16.unpack_from(data, position)
                raw = data[position + 2 : position + 2 + length]
                if len(raw) != length:
                    raise EventStreamError("header value runs past the headers")
                position += 2 + length
                value = raw.decode("utf-8") if kind == _STRING else raw
            elif kind in _FIXED_SIZES:
                size = _FIXED_SIZES[kind]
                value = kind == 0 if kind in (0, 1) else data[position : position + size]
                if position + size > len(data):
                    raise EventStreamError("header value runs past the headers")
                position += size
            else:
                raise EventStreamError(f"unknown header value type {kind}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError):
        raise EventStreamError("malformed headers") from None
    return headers


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One message with string headers and both checksums, framed as Bedrock frames it.

    The local stand-ins for Bedrock (the tests' fake, the benchmark's stub)
    build their streams with it, so they speak exactly what the decoder reads.
    """
    encoded = b"".join(
        bytes([len(name)]) + name.encode() + bytes([_STRING]) + _UINT16.pack(len(raw)) + raw
        for name, value in headers.items()
        for raw in (value.encode(),)
    )
    total = PRELUDE_LENGTH + len(encoded) + len(payload) + 4
    head = struct.pack(">II", total, len(encoded))
    prelude = head + struct.pack(">I", crc32(head))
    body = prelude + encoded + payload
    return body + struct.pack(">I", crc32(body))
