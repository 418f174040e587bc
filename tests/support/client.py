"""Plain-HTTP helpers for tests that need to see exactly what the gateway sends back."""

from __future__ import annotations

import json
import re
from typing import Any

from .fake_upstream import MODEL

HEADERS = {"x-api-key": "sk-ant-test-key", "anthropic-version": "2023-06-01"}
_FRAME = re.compile(r"event: [^\r\n]*\n(data: [^\r\n]*\n)+")


def request_body(text: str = "hello", *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }
    if stream:
        body["stream"] = True
    return body


def policy_chain(*policies: tuple[str, dict[str, Any]]) -> str:
    """Chain JSON for POLICY_CONFIG: one (policy, options) pair per policy, in order."""
    return json.dumps({"policies": [{"policy": p, "options": o} for p, o in policies]})


def sse_frames(payload: str) -> list[tuple[str, str]]:
    """Split a gateway SSE body into (event, data) pairs, asserting every frame is well formed.

    Well formed: an `event:` line, one or more `data:` lines, a blank line; nothing else.
    """
    assert payload == "" or payload.endswith("\n\n"), payload[-200:]
    frames: list[tuple[str, str]] = []
    for raw in payload.split("\n\n")[:-1]:
        assert _FRAME.fullmatch(raw + "\n"), raw[:200]
        name, *data = raw.split("\n")
        frames.append(
            (name.removeprefix("event: "), "\n".join(d.removeprefix("data: ") for d in data))
        )
    return frames


def error_of(data: str | bytes) -> dict[str, Any]:
    """The `error` object of an Anthropic-shaped error body, asserting its shape."""
    payload = json.loads(data)
    assert payload["type"] == "error"
    assert set(payload["error"]) == {"type", "message"}
    return dict(payload["error"])


def user_request(content: Any, **extra: Any) -> dict[str, Any]:
    """A Messages request with one user turn holding `content`."""
    return {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": content}],
        **extra,
    }
