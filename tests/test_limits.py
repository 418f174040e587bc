"""Issue 42: spend and rate limits per caller, through the real gateway with the official SDK.

Each gateway is the real app under uvicorn with a wall clock the test holds
(`WallClock`), so a window ends when the test says so; the SDK's own wait on
`retry-after` is the only waiting, about a second, never a test's sleep.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import pytest
from policy_gateway import settings
from policy_gateway.app import create_app

from .support.fake_upstream import MODEL, FakeUpstream
from .support.sdk import ask, both, client
from .support.servers import ThreadedServer, serving

# 2026-12-06T10:00:00Z: a minute's start, mid-day, mid-month.
MINUTE_START = 1796551200.0
CALLER_KEY = "sk-ant-caller-one-0123456789"
OTHER_KEY = "sk-ant-caller-two-0123456789"


class WallClock:
    """The gateway's wall clock (its limits' windows), moved only by the test."""

    def __init__(self, now: float = MINUTE_START + 10) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def document(limits: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"policies": [], "limits": limits, **extra})


@contextmanager
def gateway(
    upstream_url: str, clock: WallClock, policy: str, **overrides: Any
) -> Iterator[ThreadedServer]:
    config = settings.Settings(
        upstream_base_url=upstream_url, upstream_max_retries=0, policy_config=policy, **overrides
    )
    with serving(create_app(config, clock)) as server:
        yield server


def ratelimit_headers(headers: httpx2.Headers) -> dict[str, str]:
    return {
        name: value
        for name, value in headers.items()
        if name.startswith("anthropic-ratelimit-") or name == "retry-after"
    }


@both
def test_the_61st_request_of_a_minute_is_refused_and_the_sdk_succeeds_after_waiting(
    upstream: FakeUpstream, upstream_url: str, streaming: bool
) -> None:
    clock = WallClock()
    with gateway(upstream_url, clock, document({"requests_per_minute": 60})) as server:
        caller = client(server.url, api_key=CALLER_KEY)
        for n in range(60):
            raw = caller.messages.with_raw_response.create(
                model=MODEL,
                max_tokens=16,
                stream=streaming,
                messages=[{"role": "user", "content": "hi"}],
            )
            assert raw.headers["anthropic-ratelimit-requests-limit"] == "60"
            assert raw.headers["anthropic-ratelimit-requests-remaining"] == str(59 - n)
            assert raw.headers["anthropic-ratelimit-requests-reset"] == "2026-12-06T10:01:00Z"
            raw.parse()
        assert len(upstream.requests) == 60
        clock.now = MINUTE_START + 59.5
        with pytest.raises(anthropic.RateLimitError) as refused:
            ask(caller, streaming)
        assert len(upstream.requests) == 60, "a refused call reaches no upstream"
        error = refused.value
        assert error.status_code == 429
        kind, message = error.response.json()["error"].values()
        assert kind == "rate_limit_error"
        assert message.endswith(
            "reached its requests_per_minute limit of 60; it resets at 2026-12-06T10:01:00Z."
        )
        assert ratelimit_headers(error.response.headers) == {
            "anthropic-ratelimit-requests-limit": "60",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2026-12-06T10:01:00Z",
            "retry-after": "1",
        }

        # The official SDK with its default retries waits `retry-after` and tries again;
        # the test's hook moves the gateway's clock into the next minute when it sees the 429.
        def next_minute(response: httpx2.Response) -> None:
            if response.status_code == 429:
                clock.now = MINUTE_START + 61

        retrying = anthropic.Anthropic(
            base_url=server.url,
            api_key=CALLER_KEY,
            http_client=httpx2.Client(event_hooks={"response": [next_minute]}),
        )
        reply = ask(retrying, streaming)
        assert reply.content[0].type == "text"
        assert len(upstream.requests) == 61
