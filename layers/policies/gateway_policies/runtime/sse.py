"""The SSE wire format of a Messages stream: decoding upstream bytes, encoding for the client.

Pure functions and one small decoder, in the policies layer so that the
gateway's relay and `gateway_policies.testing` use the very same code: a
policy's tests see the bytes a client would.

Each frame keeps its `event:` line: the Anthropic SDKs ignore frames without one.
A frame without one decodes with an empty name, never the SSE default "message":
the gateway's relay must see that the name is missing (it refuses such a frame),
and re-encoded as `event: message` the SDKs would act on it.
Line endings may be \\n, \\r\\n or \\r, and a frame may be split anywhere across
network chunks, including between the \\r and \\n of one line ending.
"""

from __future__ import annotations

from ..base import StreamEvent

MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The largest event a decoder holds by default: far above any event the API sends (a
server tool's result, a whole document, comes in one `content_block_start`), far below
what an endless event would take. The gateway passes its UPSTREAM_MAX_ANSWER_BYTES."""


class EventTooLarge(ValueError):
    """An event (or what has arrived of one) is larger than the decoder's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a stream event is larger than {limit} bytes")
        self.limit = limit


class SSEDecoder:
    """Turns a byte stream into complete StreamEvents, as soon as each one is complete.

    Linear in the bytes fed: each chunk is scanned once, for the blank line
    ending a frame, from where the last scan stopped (an event trickled in
    4 KB chunks is never rescanned whole per chunk), and an event larger than
    `max_event_bytes` raises EventTooLarge as soon as that much of it is held.
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buffer = bytearray()
        self._carriage_return = False
        self._max_event_bytes = max_event_bytes

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        if self._carriage_return:
            chunk = b"\r" + chunk
        self._carriage_return = chunk.endswith(b"\r")
        if self._carriage_return:
            chunk = chunk[:-1]
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buffer = self._buffer
        # The held bytes end without a blank line; one may straddle the last byte.
        scanned = max(len(buffer) - 1, 0)
        buffer += chunk
        end = buffer.rfind(b"\n\n", scanned)
        if end < 0:
            if len(buffer) > self._max_event_bytes:
                raise EventTooLarge(self._max_event_bytes)
            return []
        with memoryview(buffer) as held:
            complete = held[:end].tobytes()
        del buffer[: end + 2]
        limit = self._max_event_bytes
        if len(buffer) > limit or (
            end > limit and any(len(frame) > limit for frame in complete.split(b"\n\n"))
        ):
            raise EventTooLarge(limit)
        # Decoded once for all its frames: a blank line never splits a character,
        # so each frame decodes as it would alone.
        frames = complete.decode("utf-8", "replace").split("\n\n")
        return [event for frame in frames if (event := _parse_frame(frame)) is not None]

    def flush(self) -> list[StreamEvent]:
        """Return a final frame that the upstream ended without a blank line."""
        frame = self._buffer.decode("utf-8", "replace")
        self._buffer = bytearray()
        self._carriage_return = False
        event = _parse_frame(frame)
        return [] if event is None else [event]


def _parse_frame(frame: str) -> StreamEvent | None:
    # Fast path for the shape the Messages API always sends, one `event:` line
    # and one `data:` line; it yields exactly what the general loop below would.
    if frame.startswith("event: "):
        head, found, data_line = frame.partition("\ndata: ")
        if found and "\n" not in head and "\n" not in data_line:
            return StreamEvent(head[7:], data_line)
    name = ""
    data: list[str] = []
    for raw in frame.split("\n"):
        if not raw or raw.startswith(":"):
            continue
        field, _, value = raw.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if not data:
        return None
    return StreamEvent(name, "\n".join(data))


def _frame(event: StreamEvent) -> str:
    data = event.data
    if "\n" in data or "\r" in data:
        lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        data = "\ndata: ".join(lines)
    return f"event: {event.event}\ndata: {data}\n\n"


def encode(event: StreamEvent) -> bytes:
    return _frame(event).encode()


def encode_many(events: list[StreamEvent]) -> bytes:
    # One encode for the whole batch: the relay sends every batch as one write.
    return "".join([_frame(event) for event in events]).encode()
