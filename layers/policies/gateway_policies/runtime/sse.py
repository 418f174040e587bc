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


class SSEDecoder:
    """Turns a byte stream into complete StreamEvents, as soon as each one is complete."""

    def __init__(self) -> None:
        self._buffer = b""
        self._carriage_return = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        if self._carriage_return:
            chunk = b"\r" + chunk
        self._carriage_return = chunk.endswith(b"\r")
        if self._carriage_return:
            chunk = chunk[:-1]
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        self._buffer += chunk
        if b"\n\n" not in self._buffer:
            return []
        *frames, self._buffer = self._buffer.split(b"\n\n")
        return [event for frame in frames if (event := _parse_frame(frame)) is not None]

    def flush(self) -> list[StreamEvent]:
        """Return a final frame that the upstream ended without a blank line."""
        frame, self._buffer = self._buffer, b""
        self._carriage_return = False
        event = _parse_frame(frame)
        return [] if event is None else [event]


def _parse_frame(frame: bytes) -> StreamEvent | None:
    # Fast path for the shape the Messages API always sends, one `event:` line
    # and one `data:` line; it yields exactly what the general loop below would.
    if frame.startswith(b"event: "):
        head, found, data_line = frame.partition(b"\ndata: ")
        if found and b"\n" not in head and b"\n" not in data_line:
            return StreamEvent(
                head[7:].decode("utf-8", "replace"), data_line.decode("utf-8", "replace")
            )
    name = ""
    data: list[str] = []
    for raw in frame.split(b"\n"):
        if not raw or raw.startswith(b":"):
            continue
        field, _, value = raw.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value.decode("utf-8", "replace"))
    if not data:
        return None
    return StreamEvent(name, "\n".join(data))


def encode(event: StreamEvent) -> bytes:
    data = event.data
    if "\n" in data or "\r" in data:
        lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        data = "\ndata: ".join(lines)
    return f"event: {event.event}\ndata: {data}\n\n".encode()


def encode_many(events: list[StreamEvent]) -> bytes:
    return b"".join(encode(event) for event in events)
