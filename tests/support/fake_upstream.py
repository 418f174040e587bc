"""A scriptable fake of the Anthropic Messages API, served for real over HTTP.

Each request is recorded (method, path, headers, raw body). Replies come from
a script queue, one per request; with the queue empty, the fake answers like
the API: an echo of the last user text, as JSON or as an SSE stream, and the
Message Batches, Models and Files APIs of fake_resources.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from policy_gateway.local.simulated_reply import request_problem
from starlette.types import Receive, Scope, Send

from .fake_resources import FakeResources
from .scripted import Scripted
from .servers import lifespan_handled, request_body

MODEL = "claude-sonnet-4-6"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes
    query: str = ""
    received_at: float = field(default_factory=time.time)
    method: str = "POST"
    connection: tuple[str, int] | None = None
    """The client's address and port: one per TCP connection the gateway opened."""

    @property
    def json(self) -> Any:
        return json.loads(self.body)


SSE = list[tuple[str, dict[str, Any]]]


@dataclass
class Reply:
    """One scripted answer. `events` makes it an SSE stream."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    events: SSE | None = None
    break_after: int | None = None
    delay: float = 0.0
    event_delay: float = 0.0
    chunks: Callable[[], Iterator[bytes]] | None = None
    """A raw body sent chunk by chunk (a JSONL results file)."""
    content_type: str | None = None
    """None: the type of the reply's kind (JSON, HTML for `raw`, SSE, binary for `chunks`)."""

    @classmethod
    def error(cls, status: int, error_type: str, message: str = "scripted error") -> Reply:
        return cls(
            status=status,
            body={
                "type": "error",
                "error": {"type": error_type, "message": message},
                "request_id": "req_fake_error",
            },
            headers={"request-id": "req_fake_error"},
        )


def message(
    text: str, model: str = MODEL, content: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content if content is not None else [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def text_events(parts: list[str], model: str = MODEL) -> SSE:
    start = message("", model, content=[])
    start["stop_reason"] = None
    events: SSE = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    events += [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": part},
            },
        )
        for part in parts
    ]
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(parts)},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def api_rules(body: dict[str, Any]) -> Reply | None:
    """The API's checks of a request (the simulator's): a 400 for what it would refuse."""
    problem = request_problem(body, "max_tokens" not in body)
    return None if problem is None else Reply.error(400, "invalid_request_error", problem)


def last_user_text(body: dict[str, Any]) -> str:
    content = body.get("messages", [{}])[-1].get("content", "")
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


class FakeUpstream(Scripted["Recorded", "Reply"]):
    """ASGI app; thread-safe recording and scripting."""

    def __init__(self) -> None:
        super().__init__()
        # time.monotonic() of each stream whose reader went away before its end.
        self.disconnects: list[float] = []
        self.resources = FakeResources()
        # Checks a real API makes (a context limit, the thinking budget rule): with
        # the script empty, a request body `rules` answers for is refused with it.
        self.rules: Callable[[dict[str, Any]], Reply | None] | None = None

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.disconnects.clear()
            self.rules = None
        self.resources.reset()

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self._script:
                return self._script.popleft()
        answer = self.resources.answer(
            recorded.method,
            recorded.path,
            recorded.body,
            recorded.headers.get("host", ""),
            lambda params: message(f"echo: {last_user_text(params)}"),
        )
        if answer is not None:
            return Reply(
                status=answer.status,
                body=answer.body,
                chunks=answer.chunks,
                content_type=answer.content_type,
                headers={"request-id": "req_fake"},
            )
        body = recorded.json if recorded.body else {}
        refusal = self.rules(body) if self.rules is not None else None
        if refusal is not None:
            return refusal
        text = f"echo: {last_user_text(body)}"
        if recorded.path.endswith("/count_tokens"):
            return Reply(body={"input_tokens": len(recorded.body) // 4})
        if body.get("stream") is True:
            return Reply(events=text_events(text.split(" ")), headers={"request-id": "req_fake"})
        return Reply(body=message(text), headers={"request-id": "req_fake"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await lifespan_handled(scope, receive, send):
            return
        body = await request_body(receive)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        recorded = Recorded(
            scope["path"],
            headers,
            body,
            scope["query_string"].decode(),
            method=scope["method"],
            connection=tuple(scope["client"]) if scope.get("client") else None,
        )
        reply = self._next(recorded)
        if reply.delay:
            # A client (the gateway) that gives up while we "think" is recorded.
            with anyio.move_on_after(reply.delay):
                while (await receive())["type"] != "http.disconnect":
                    pass
                self.disconnects.append(time.monotonic())
                return
        out_headers = [(k.encode(), v.encode()) for k, v in reply.headers.items()]
        if reply.chunks is not None:
            await send(
                {
                    "type": "http.response.start",
                    "status": reply.status,
                    "headers": [
                        (b"content-type", (reply.content_type or "application/binary").encode()),
                        *out_headers,
                    ],
                }
            )
            for chunk in reply.chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        if reply.events is None:
            body = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
            content_type = b"text/html" if reply.raw is not None else b"application/json"
            if reply.content_type is not None:
                content_type = reply.content_type.encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": reply.status,
                    "headers": [(b"content-type", content_type), *out_headers],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [
                    (b"content-type", (reply.content_type or "text/event-stream").encode()),
                    *out_headers,
                ],
            }
        )
        events = reply.events
        if reply.break_after is not None:
            events = events[: reply.break_after]

        async def stream() -> None:
            for name, data in events:
                frame = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                if reply.event_delay:
                    await asyncio.sleep(reply.event_delay)

        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                self.disconnects.append(time.monotonic())
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            await stream()
            group.cancel_scope.cancel()
        if reply.break_after is not None:
            raise ConnectionAbortedError("scripted mid-stream failure")
        await send({"type": "http.response.body", "body": b""})
