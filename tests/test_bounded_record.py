"""The audit record stays bounded and structure-only, whatever a request or an answer holds.

One property, through the real gateway (a child process, as in Lambda or
`serve`) with the official SDK as client, the fake upstream and moto's SSM:
a 1 MB string holding an Anthropic API key, put in any of a request's fields
and as a key in any of its objects, and chosen by the upstream as the
answer's model, tool name and error type, leaves every log line and EMF
document under the bound and parseable as JSON, every span attribute
bounded, and none of them holding the key. The chain strips tools (a server
tool too), runs a shadow policy, blocks the model's tool call, and changes
the request so that the upstream's 400 makes a fallback (the flag on in SSM):
every record the issue names is written on the way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
from gateway_policies import recorder
from gateway_policies.testing import (
    as_pairs,
    message_delta,
    message_start,
    message_stop,
    tool_use_block,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_gateway import settings as gateway_settings
from policy_gateway.observability import tracing_settings

from .support.clock import eventually
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message
from .support.servers import gateway_process
from .support.traces import OTLPReceiver

KEY = "sk-ant-api03-" + "K3yM4t3r1aL" * 8 + "xAA"
TAIL = KEY[-32:]
"""What a record cut at 64 characters can never hold, wherever the key sat."""
MEGABYTE = 1024 * 1024
CHAIN = {
    "policies": [
        {
            "policy": "strip_tools",
            "options": {"names": ["web_search", "bash"], "allowed_mcp_servers": ["docs"]},
        },
        {
            "policy": "strip_tools",
            "mode": "shadow",
            "options": {"names": ["lookup"], "allowed_mcp_servers": ["docs"]},
        },
        {"policy": "inject_system_prompt", "options": {"text": "Be kind."}},
        {
            "policy": "block_tool_calls",
            "options": {"rules": [{"tool": "(?s).*sk-ant-.*"}], "allowed_mcp_servers": ["docs"]},
        },
    ]
}
TEMPLATE: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 100,
    "system": [{"type": "text", "text": "be brief"}],
    "metadata": {"user_id": "u-1"},
    "stop_sequences": ["STOP"],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "v"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}],
        },
    ],
    "tools": [
        {
            "name": "lookup",
            "description": "look it up",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
        {"name": "bash", "description": "run", "input_schema": {"type": "object"}},
    ],
    "mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "docs"}],
    "tool_choice": {"type": "tool", "name": "bash", "disable_parallel_tool_use": True},
}
Location = tuple[str | int, ...]
STRIPPED = ["bash", "web_search_20250305"]
NOT_RECORDS = ("policy gateway on ", "fallback budget: ")


def _slots(value: Any, location: Location = ()) -> Iterator[tuple[str, Location]]:
    """Every string field ("value") and every object ("key") of the template."""
    if isinstance(value, dict):
        yield "key", location
        for key, item in value.items():
            yield from _slots(item, (*location, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _slots(item, (*location, index))
    elif isinstance(value, str):
        yield "value", location


SLOTS = list(_slots(TEMPLATE))


def planted(offset: float) -> str:
    """1 MB holding the key, `offset` of the way in."""
    before = int((MEGABYTE - len(KEY)) * offset)
    return "a" * before + KEY + "b" * (MEGABYTE - len(KEY) - before)


def planted_request(slots: list[tuple[str, Location]], big: str) -> dict[str, Any]:
    request = copy.deepcopy(TEMPLATE)
    for kind, location in slots:
        parent: Any = request
        for part in location[:-1] if kind == "value" else location:
            parent = parent[part]
        if kind == "value":
            parent[location[-1]] = big
        else:
            parent[big] = "x"
    return request


def answer(streaming: bool, big: str) -> Reply:
    """The model's answer: its model and its tool call's name are the 1 MB string."""
    if streaming:
        events = [
            message_start(big),
            *tool_use_block(0, big, {"q": "v"}),
            message_delta("tool_use"),
            message_stop(),
        ]
        return Reply(events=as_pairs(events), headers={"request-id": "req_fake"})
    content = [{"type": "tool_use", "id": "toolu_9", "name": big, "input": {}}]
    body = message("", model=big, content=content) | {"stop_reason": "tool_use"}
    return Reply(body=body, headers={"request-id": "req_fake"})


def call(
    url: str,
    upstream: FakeUpstream,
    out: Path,
    count: int,
    slots: list[tuple[str, Location]],
    big: str,
    stream: bool,
) -> None:
    """One call with `big` in `slots`, whose first attempt the upstream refuses with `big` as
    its error type and whose fallback it answers; returns once the `count`th call line is out."""
    upstream.reset()
    upstream.script(Reply.error(400, big), answer(stream, big))
    ask(url, planted_request(slots, big), stream)
    eventually(lambda: out.read_text().count('"call finished"') >= count, 10)


def ask(url: str, request: dict[str, Any], streaming: bool) -> None:
    known = {name: request.pop(name) for name in ("model", "max_tokens", "messages")}
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test-key", max_retries=0)
    try:
        reply: Any = client.messages.create(**known, extra_body=request, stream=streaming)
        if streaming:
            for _ in reply:
                pass
    except anthropic.APIError:
        pass  # the record is what is judged, whatever the answer was


def check_records(text: str, spans: list[Any]) -> dict[str, int]:
    """Every line under the bound, JSON, without the key; every span attribute bounded."""
    seen = {"lines": 0, "fallbacks": 0, "strips": 0, "shadow": 0, "blocks": 0}
    for line in text.splitlines():
        assert len(line.encode()) < recorder.MAX_LINE_BYTES
        assert TAIL not in line
        if not line.startswith("{"):
            # `serve`'s banner and Python's warnings (stderr shares the file), not records.
            assert line.startswith(NOT_RECORDS) or "Warning" in line or "warnings.warn" in line
            continue
        parsed = json.loads(line)
        # Bounded where it was recorded: the log formatter's last resort never had to cut.
        assert recorder.LINE_CUT not in parsed
        seen["lines"] += 1
        if str(parsed.get("message", "")).startswith("passthrough fallback:"):
            seen["fallbacks"] += 1
        for action in parsed.get("policy_actions", []):
            seen["strips"] += action["action"] == "strip"
            seen["shadow"] += action.get("shadow") is True
            seen["blocks"] += action["action"] == "block"
    for span in spans:
        for key, value in span.attributes.items():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str):
                    assert len(item) <= recorder.MAX_TEXT + len(recorder.CUT), key
                    assert TAIL not in item
    return seen


def test_a_megabyte_key_anywhere_leaves_every_record_bounded_json_and_without_it(
    tmp_path: Path,
    upstream: FakeUpstream,
    upstream_url: str,
    set_flag: Callable[[str], None],
    otlp: tuple[OTLPReceiver, str],
) -> None:
    receiver, otlp_url = otlp
    set_flag("true")
    out = tmp_path / "gateway.out"
    env = {
        gateway_settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        gateway_settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        gateway_settings.ENV_POLICY_CONFIG: json.dumps(CHAIN),
        gateway_settings.ENV_FLAG_TTL: "0",
        gateway_settings.ENV_FALLBACK_BUDGET: "1000",
        tracing_settings.ENV_OTLP_ENDPOINT: otlp_url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    calls = 0
    with gateway_process(env, stdout_path=out) as (url, _):

        @settings(
            max_examples=12,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(
            slots=st.lists(st.sampled_from(SLOTS), min_size=1, max_size=3, unique=True),
            offset=st.sampled_from([0.0, 0.5, 1.0]),
            streaming=st.booleans(),
        )
        def one_call(slots: list[tuple[str, Location]], offset: float, streaming: bool) -> None:
            nonlocal calls
            calls += 1
            call(url, upstream, out, calls, slots, planted(offset), streaming)

        one_call()
        # The fallback's examples are certain, not left to the draw: the key in
        # tool_choice (item 3's case) and in a stripped server tool's name (item 2's).
        certain: list[tuple[list[tuple[str, Location]], bool]] = [
            ([("key", ("tool_choice",))], False),
            ([("value", ("tools", 1, "name"))], True),
        ]
        for slots, streaming in certain:
            calls += 1
            call(url, upstream, out, calls, slots, planted(0.5), streaming)
        spans = receiver.spans(expect=calls)
    text = out.read_text()
    seen = check_records(text, spans)
    *_, last = (json.loads(line) for line in text.splitlines() if '"call finished"' in line)
    # The stripped server tool by its type, never the name the client gave it.
    assert {"policy": "strip_tools", "action": "strip", "tools": STRIPPED} in last["policy_actions"]
    assert seen["fallbacks"] >= 2
    assert seen["strips"]
    assert seen["shadow"]
    assert seen["blocks"]
    assert len(spans) >= calls
