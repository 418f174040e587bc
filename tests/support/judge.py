"""A scripted judge service on loopback: answers judge calls as a test says, records them.

It speaks the Messages API as a judge provider sees it: each request is kept
(`requests`, the body's bytes and JSON, headers), answered by `answer(body)`
(a verdict call by default), after `delay` seconds; `max_in_flight` is how
many requests it held at once.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .servers import ThreadedServer

Answer = tuple[int, Any]
"""A status and a JSON body."""


def verdict(
    decision: str = "allow",
    reason: str = "fine",
    *,
    rule: str | None = None,
    replacement: str | None = None,
    risk: float | None = None,
    extra: dict[str, Any] | None = None,
) -> Answer:
    given: dict[str, Any] = {"decision": decision, "reason": reason}
    if rule is not None:
        given["rule"] = rule
    if replacement is not None:
        given["replacement"] = replacement
    if risk is not None:
        given["risk"] = risk
    given.update(extra or {})
    content = [{"type": "tool_use", "id": "toolu_judge", "name": "verdict", "input": given}]
    return 200, judge_message(content)


def text_answer(text: str = '{"decision": "allow"}') -> Answer:
    return 200, judge_message([{"type": "text", "text": text}])


def judge_message(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_judge",
        "type": "message",
        "role": "assistant",
        "model": "judge-1",
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


@dataclass
class JudgeRequest:
    body: bytes
    headers: dict[str, str]

    @property
    def json(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded

    @property
    def user(self) -> str:
        content: str = self.json["messages"][0]["content"]
        return content

    @property
    def nonce(self) -> str:
        found = re.match(r"<judged-data-([0-9a-f]+)>\n", self.user)
        assert found, self.user[:80]
        return found.group(1)

    @property
    def data(self) -> dict[str, Any]:
        """The JSON inside the delimiter."""
        inner = self.user.split("\n", 1)[1].rsplit("\n", 1)[0]
        loaded: dict[str, Any] = json.loads(inner)
        return loaded


@dataclass
class ScriptedJudge:
    answer: Callable[[dict[str, Any]], Answer] = lambda body: verdict()
    delay: float = 0.0
    requests: list[JudgeRequest] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    async def _messages(self, request: Request) -> Response:
        body = await request.body()
        self.requests.append(JudgeRequest(body, dict(request.headers)))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            status, payload = self.answer(json.loads(body))
        finally:
            self.in_flight -= 1
        return JSONResponse(payload, status_code=status)


def serve_judge() -> Iterator[tuple[ScriptedJudge, str]]:
    judge = ScriptedJudge()
    server = ThreadedServer(judge.app()).start()
    yield judge, server.url
    server.stop()
