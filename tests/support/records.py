"""A recorded conversation through the real gateway, as the records tests need it.

Alice is recorded (her `callers` entry says `"record": {"enabled": true}`), Bob is
not; both run the same chain: secrets redacted, `bash rm -rf` blocked. `converse`
drives one conversation of hers through the official SDK, JSON and stream turns:
a secret redacted, a tool call blocked, an edited turn (a branch), then Bob's call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
from policy_gateway import settings

from ..conftest import KEYS_SECRET, UPSTREAM_SECRET, PutSecret
from .fake_upstream import MODEL, FakeUpstream, Reply, message, text_events
from .gateway import GatewayFactory, GatewayStdout
from .servers import wait_ready
from .tool_calls import BASH_RM, TOOLS, tool_reply

ALICE_KEY = "gk-alice-0123456789abcdef"
BOB_KEY = "gk-bob-0123456789abcdef"
KEYS = {"keys": [{"name": "alice", "key": ALICE_KEY}, {"name": "bob", "key": BOB_KEY}]}
SECRET = "AKIAIOSFODNN7EXAMPLE"
CHAIN = [
    {"policy": "redact_secrets"},
    {"policy": "block_tool_calls", "options": {"rules": [BASH_RM]}},
]
DOCUMENT = {
    "policies": CHAIN,
    "callers": {"alice": {"policies": CHAIN, "record": {"enabled": True}}},
}
SYSTEM: Any = [{"type": "text", "text": "You are a careful coding agent. " * 40}]


def start_gateway(make_gateway: GatewayFactory, put_secret: PutSecret, **overrides: Any) -> str:
    """A gateway in gateway_key mode with Alice's and Bob's keys and DOCUMENT, ready."""
    put_secret(KEYS_SECRET, json.dumps(KEYS))
    put_secret(UPSTREAM_SECRET, json.dumps({"api_key": "sk-ant-upstream"}))
    url = make_gateway(
        auth_mode=settings.AUTH_GATEWAY_KEY,
        gateway_keys_secret=KEYS_SECRET,
        upstream_api_key_secret=UPSTREAM_SECRET,
        policy_config=json.dumps(DOCUMENT),
        **overrides,
    )
    wait_ready(url)  # the keys read at start-up, however slow the machine
    return url


def turn(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def said(reply: anthropic.types.Message) -> dict[str, Any]:
    """An answer as a client resends it on the next turn."""
    return {"role": "assistant", "content": [block.to_dict() for block in reply.content]}


def json_call(sdk: anthropic.Anthropic, messages: Any) -> tuple[bytes, Any]:
    raw = sdk.messages.with_raw_response.create(
        model=MODEL, max_tokens=256, system=SYSTEM, tools=TOOLS, messages=messages
    )
    return raw.http_response.content, raw.parse()


def stream_call(sdk: anthropic.Anthropic, messages: Any) -> Any:
    with sdk.messages.stream(
        model=MODEL, max_tokens=256, system=SYSTEM, tools=TOOLS, messages=messages
    ) as events:
        return events.get_final_message()


def finished(stdout: GatewayStdout, calls: int) -> list[dict[str, Any]]:
    """The lines of the calls answered, once `calls` were written (each after its record);
    a call a slow machine refused before anything went upstream is not one of them."""

    def answered() -> list[dict[str, Any]]:
        lines = [line for line in stdout.lines() if line.get("message") == "call finished"]
        return [line for line in lines if line.get("status") == 200]

    stdout.until(lambda _: len(answered()) >= calls, timeout=30)
    lines = answered()
    assert len(lines) == calls
    return lines


@dataclass
class Conversed:
    sent: list[bytes]
    """Alice's four request bodies as the upstream received them."""
    json_answers: tuple[bytes, bytes]
    """The bodies the SDK received for her first and fourth calls."""
    streamed: tuple[Any, Any]
    """The final messages of her second and third (the edited) calls."""


def converse(url: str, upstream: FakeUpstream, stdout: GatewayStdout) -> Conversed:
    """Alice's conversation (4 calls, one a branch), then one call of Bob's."""
    # The SDK's own retries: on a loaded machine the gateway may answer "cannot read its
    # credentials right now" (a 500 before anything goes upstream) while moto is slow.
    alice, bob = (anthropic.Anthropic(base_url=url, api_key=key) for key in (ALICE_KEY, BOB_KEY))
    first = [turn(f"deploy with {SECRET} please")]
    upstream.script(tool_reply(False, ("bash", {"command": "rm -rf /"}), text="Sure."))
    body1, reply1 = json_call(alice, first)
    second = [*first, said(reply1), turn("what happened?")]
    upstream.script(Reply(events=text_events(["It was ", "blocked."])))
    reply2 = stream_call(alice, second)
    edited = [*first, said(reply1), turn(f"try again, key {SECRET}")]
    upstream.script(Reply(events=text_events(["Trying."])))
    reply3 = stream_call(alice, edited)
    fourth = [*second, said(reply2), turn("thanks")]
    upstream.script(Reply(body=message("You are welcome.")))
    body4, _ = json_call(alice, fourth)
    sent = [request.body for request in upstream.requests]
    upstream.script(Reply(body=message("hello bob")))
    json_call(bob, first)
    finished(stdout, 5)
    return Conversed(sent, (body1, body4), (reply2, reply3))


Starter = Callable[..., str]
