"""Bedrock's response stream as the Messages API's SSE, message by message as it arrives.

InvokeModelWithResponseStream answers in AWS event-stream framing
(eventstream.py decodes it, checksums checked); each `chunk` message carries one
Messages API event, base64-encoded, which goes out as one SSE frame with its
`event:` line, exactly as the Anthropic API sends it.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import AsyncIterator
from typing import Any

from gateway_policies import StreamEvent
from gateway_policies.runtime.sse import encode

from .errors import exception_error
from .eventstream import EventStreamDecoder, EventStreamError, Message


async def sse_from_event_stream(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Bedrock's event stream as Messages API SSE, message by message as it arrives.

    A corrupt frame raises EventStreamError after the intact events before it
    have been yielded; an exception message becomes the stream's one `error`
    event, and ends it, as an `error` event ends an Anthropic stream.
    """
    decoder = EventStreamDecoder()
    async for chunk in chunks:
        failure: EventStreamError | None = None
        try:
            messages = decoder.feed(chunk)
        except EventStreamError as exc:
            failure = exc
            messages = exc.decoded
        out: list[bytes] = []
        ended = False
        try:
            for message in messages:
                frame, ended = _frame(message)
                out.append(frame)
                if ended:
                    break
        except EventStreamError as exc:
            failure = exc
        if out:
            yield b"".join(out)
        if ended:
            return
        if failure is not None:
            raise failure
    decoder.finish()


def _frame(message: Message) -> tuple[bytes, bool]:
    """One message as SSE bytes (empty if it carries no event), and whether it ends the stream."""
    headers = message.headers
    kind = message.message_type
    if kind == "event":
        if headers.get(":event-type") != "chunk":
            return b"", False
        return _event(message.payload), False
    if kind == "exception":
        exception = str(headers.get(":exception-type", ""))
        try:
            text = json.loads(message.payload).get("message", "")
        except (ValueError, AttributeError):
            text = ""
        _, error = exception_error(exception, str(text), 500)
    else:
        code = str(headers.get(":error-code", "InternalFailure"))
        _, error = exception_error(code, str(headers.get(":error-message", "")), 500)
    return encode(StreamEvent.from_json("error", error)), True


def _event(payload: bytes) -> bytes:
    """A `chunk` payload, `{"bytes": "<base64 event>", ...}`, as one SSE frame."""
    try:
        # Bedrock writes `bytes` first; any other layout takes the general path.
        if payload.startswith(b'{"bytes":"'):
            encoded = payload[10 : payload.index(b'"', 10)]
        else:
            encoded = json.loads(payload)["bytes"].encode()
        data = binascii.a2b_base64(encoded, strict_mode=True)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EventStreamError("a chunk event without base64 bytes") from None
    try:
        if data.startswith(b'{"type":"'):
            name = data[9 : data.index(b'"', 9)]
        else:
            parsed: Any = json.loads(data)
            name = str(parsed["type"]).encode()
    except (ValueError, KeyError, TypeError):
        raise EventStreamError("a chunk without a Messages API event") from None
    if b"\n" in data or b"\r" in data:
        return encode(StreamEvent(name.decode(), data.decode()))
    return b"event: " + name + b"\ndata: " + data + b"\n\n"
