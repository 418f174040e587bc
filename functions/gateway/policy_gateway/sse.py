"""Server-sent events: incremental decoding from upstream bytes, encoding for the client.

Each frame keeps its `event:` line: the Anthropic SDKs ignore frames without one.
Line endings may be \\n, \\r\\n or \\r, and a frame may be split anywhere across
network chunks, including between the \\r and \\n of one line ending.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import anyio
from gateway_policies import StreamEvent

# Chunks read ahead of the client: enough to batch a burst, small enough that a
# slow client still holds back the upstream read (backpressure) almost at once.
READ_AHEAD_CHUNKS = 64


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
    name = "message"
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


@asynccontextmanager
async def coalesced(chunks: AsyncIterable[bytes]) -> AsyncIterator[AsyncIterator[bytes]]:
    """Relay `chunks` joined into as few pieces as arrive together, without waiting for more.

    The upstream sends every event as its own HTTP chunk, and the HTTP client
    yields them one by one even when a single socket read brought hundreds.
    Writing each to the client separately costs one system call per event. A
    reader task moves chunks into a bounded buffer without yielding to the
    event loop while more are already at hand; the consumer then takes
    everything buffered at once. A lone event (the usual pace of a live
    stream) goes on as soon as it arrives, so time to first event is kept.
    """
    sender, receiver = anyio.create_memory_object_stream[bytes](READ_AHEAD_CHUNKS)
    failures: list[Exception] = []

    async def read() -> None:
        async with sender:
            try:
                async for chunk in chunks:
                    try:
                        sender.send_nowait(chunk)
                    except anyio.WouldBlock:
                        await sender.send(chunk)
            except Exception as exc:
                # Handed to the consumer after the chunks before it, so the
                # relay sees the failure where it happened, with its own type.
                failures.append(exc)

    async def joined() -> AsyncIterator[bytes]:
        async for chunk in receiver:
            parts = [chunk]
            while True:
                try:
                    parts.append(receiver.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            yield parts[0] if len(parts) == 1 else b"".join(parts)
        if failures:
            raise failures[0]

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            try:
                yield joined()
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as grouped:
        # The task group wraps whatever the relay's loop raised (a read timeout,
        # a client gone); the relay must see the original, with its own type.
        if len(grouped.exceptions) == 1:
            raise grouped.exceptions[0] from None
        raise
