"""The relay's reads: the upstream's chunks coalesced into as few writes as arrive together.

The SSE wire format (decoder and encoder) lives in the layer,
gateway_policies.runtime.sse, so that a policy's tests (gateway_policies.testing)
run events through exactly the code that the relay uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import anyio

# Chunks read ahead of the client: enough to batch a burst, small enough that a
# slow client still holds back the upstream read (backpressure) almost at once.
READ_AHEAD_CHUNKS = 64


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
        # The receiver is closed with the relay, whether it read to the end or
        # stopped early (a disconnect, a policy's refusal, the deadline).
        with receiver:
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
