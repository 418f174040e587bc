"""An instant fake of the Messages API: a bare asyncio HTTP/1.1 server, run as its own process.

It is deliberately not an ASGI app: the point is that the upstream costs as
close to nothing as Python allows, so what the benchmark sees is the gateway.
Replies are chosen by request headers, which the gateway forwards untouched:

    x-bench-events: N        answer with an SSE stream of N events (else a JSON message)
    x-bench-interval-ms: T   pause T ms between events (to hold many streams open)
    x-bench-reject: MARKER   answer 400 invalid_request_error when the body contains MARKER
    x-bench-lines: N         answer with a batch results file (JSONL) of N entries, every
                             tenth a `bash` tool call, in 64 KB chunks

It also stands in for Bedrock's InvokeModelWithResponseStream, whose requests
carry no client headers: `POST /model/anthropic.bench-N/invoke-with-response-stream`
answers the same N-event stream in AWS event-stream framing, one message per
HTTP chunk, as Bedrock sends it.

    python bench/upstream_stub.py PORT
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sys
from functools import cache
from typing import Any

from policy_gateway.upstream.bedrock.eventstream import encode_message

MESSAGE = json.dumps(
    {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "Hello from the benchmark upstream."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 250, "output_tokens": 8},
    }
).encode()
REJECTION = json.dumps(
    {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "bench: rejected the rewrite"},
        "request_id": "req_bench",
    }
).encode()


BEDROCK_STREAM = re.compile(r"^/model/anthropic\.bench-(\d+)/invoke-with-response-stream$")


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _frame(name: str, payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    return _http_chunk(f"event: {name}\ndata: {data}\n\n".encode())


def _bedrock_frame(name: str, payload: dict[str, Any]) -> bytes:
    data = base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return _http_chunk(encode_message(headers, json.dumps({"bytes": data, "p": "abcd"}).encode()))


@cache
def stream_chunks(events: int, bedrock: bool = False) -> tuple[bytes, ...]:
    """A well-formed Messages stream of exactly `events` events, one HTTP chunk each."""
    frame = _bedrock_frame if bedrock else _frame
    start = {"type": "message_start", "message": {**json.loads(MESSAGE), "content": []}}
    head = [
        frame("message_start", start),
        frame(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
    ]
    tail = [
        frame("content_block_stop", {"type": "content_block_stop", "index": 0}),
        frame(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        ),
        frame("message_stop", {"type": "message_stop"}),
    ]
    delta = frame(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "word "},
        },
    )
    middle = [delta] * max(0, events - len(head) - len(tail))
    return tuple([*head, *middle, *tail][:events])


@cache
def results_chunks(lines: int) -> tuple[bytes, ...]:
    """A results file of `lines` succeeded entries, as HTTP chunks of about 64 KB."""
    text = json.loads(MESSAGE)
    tool = {
        **text,
        "content": [
            *text["content"],
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
        ],
        "stop_reason": "tool_use",
    }
    body = b"".join(
        json.dumps(
            {
                "custom_id": f"r{index}",
                "result": {"type": "succeeded", "message": tool if index % 10 == 0 else text},
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for index in range(lines)
    )
    size = 64 * 1024
    return tuple(
        b"%x\r\n%s\r\n" % (len(part), part)
        for part in (body[start : start + size] for start in range(0, len(body), size))
    )


def _response_head(status: int, headers: list[tuple[str, str]]) -> bytes:
    reason = {200: "OK", 400: "Bad Request"}[status]
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
    return f"HTTP/1.1 {status} {reason}\r\nrequest-id: req_bench\r\n{lines}\r\n".encode()


class StubProtocol(asyncio.Protocol):
    """One connection: requests are answered in order, one at a time (HTTP/1.1 keep-alive)."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        # Parsed head of the request whose body is still arriving: (headers, body start, length).
        self._pending: tuple[dict[str, str], int, int] | None = None
        self._busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._next()

    def _next(self) -> None:
        while not self._busy:
            if self._pending is None:
                end = self._buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                request_line, *lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
                headers = {":path": request_line.split(" ")[1]}
                for line in lines:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                self._pending = (headers, end + 4, int(headers.get("content-length", "0")))
            headers, start, length = self._pending
            if len(self._buffer) < start + length:
                return
            body = bytes(self._buffer[start : start + length])
            del self._buffer[: start + length]
            self._pending = None
            self._answer(headers, body)

    def _answer(self, headers: dict[str, str], body: bytes) -> None:
        assert self._transport is not None
        marker = headers.get("x-bench-reject")
        bedrock = BEDROCK_STREAM.match(headers[":path"])
        if marker and marker.encode() in body:
            self._send_json(400, REJECTION)
        elif "x-bench-lines" in headers:
            self._transport.write(
                _response_head(
                    200,
                    [("content-type", "application/binary"), ("transfer-encoding", "chunked")],
                )
                + b"".join(results_chunks(int(headers["x-bench-lines"])))
                + b"0\r\n\r\n"
            )
        elif "x-bench-events" in headers or bedrock:
            if bedrock:
                chunks = stream_chunks(int(bedrock.group(1)), bedrock=True)
            else:
                chunks = stream_chunks(int(headers["x-bench-events"]))
            interval = float(headers.get("x-bench-interval-ms", "0")) / 1000
            self._transport.write(
                _response_head(
                    200,
                    [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")],
                )
                + chunks[0]
            )
            if interval:
                self._busy = True
                asyncio.get_running_loop().create_task(self._paced(chunks[1:], interval))
            else:
                self._transport.write(b"".join(chunks[1:]) + b"0\r\n\r\n")
        else:
            self._send_json(200, MESSAGE)

    async def _paced(self, chunks: tuple[bytes, ...], interval: float) -> None:
        assert self._transport is not None
        for chunk in chunks:
            await asyncio.sleep(interval)
            if self._transport.is_closing():
                return
            self._transport.write(chunk)
        self._transport.write(b"0\r\n\r\n")
        self._busy = False
        self._next()

    def _send_json(self, status: int, body: bytes) -> None:
        assert self._transport is not None
        head = _response_head(
            status, [("content-type", "application/json"), ("content-length", str(len(body)))]
        )
        self._transport.write(head + body)


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(StubProtocol, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
