"""The official TypeScript SDK as a client of the gateway: Claude Code reads streams with it.

Its MessageStream assembles a stream as the Python SDK's does, but not quite:
once a call's input_json_delta came, it takes the partials ({} when all were
empty) where the Python SDK keeps the start's input. The hostile framings of
tests/test_stream_grammar.py, and a stream holding every kind of block, go
through the real gateway to tests/ts/stream_client.mjs, run by node with the
SDK that `make ts-client` installs from tests/ts/package-lock.json. No skip:
without node or the SDK these tests fail and say why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from gateway_policies import StreamEvent
from gateway_policies.tool_input import canonical_input

from .support.fake_upstream import MODEL, FakeUpstream
from .support.framings import (
    CITATION,
    DELTA_AFTER_STOP,
    FRAMINGS,
    GATE_RM,
    GOOD,
    INPUT_AT_START,
    sse_reply,
    wire,
)
from .support.gateway import GatewayFactory
from .support.tool_calls import TOOLS

CLIENT = Path(__file__).parent / "ts"


def ts_stream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, events: list[StreamEvent]
) -> dict[str, Any]:
    """What the TypeScript SDK's MessageStream made of `events` sent through a gateway that
    blocks `rm -rf`: the blocks it announced complete, and the final message or its error."""
    node = shutil.which("node")
    if node is None:
        raise AssertionError(
            "node (20 or later) is not installed: the TypeScript SDK tests need it"
        )
    if not (CLIENT / "node_modules" / "@anthropic-ai" / "sdk").is_dir():
        raise AssertionError("the TypeScript SDK is not installed: run `make ts-client`")
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "run it"}],
    }
    url = make_gateway(policy_config=GATE_RM)
    upstream.script(sse_reply(wire(*events)))
    run = subprocess.run(
        [node, str(CLIENT / "stream_client.mjs"), url, json.dumps(body)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=CLIENT,
    )
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def tool_inputs(result: dict[str, Any]) -> list[str]:
    """Every call input the client saw, in a completed block or in the final message."""
    final = result.get("final") or {"content": []}
    blocks = [*result["blocks"], *final["content"]]
    return [canonical_input(b.get("input")) for b in blocks if b["type"] == "tool_use"]


@FRAMINGS
def test_the_hostile_framings_never_bring_the_typescript_sdk_a_blocked_input(
    make_gateway: GatewayFactory, upstream: FakeUpstream, events: list[StreamEvent]
) -> None:
    result = ts_stream(make_gateway, upstream, events)
    assert all("rm -rf" not in text for text in tool_inputs(result)), result


def test_a_delta_after_its_blocks_stop_is_an_error_for_the_typescript_sdk(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    result = ts_stream(make_gateway, upstream, DELTA_AFTER_STOP)
    assert "final" not in result
    assert result["error"]["type"] == "api_error"
    assert tool_inputs(result) == ["{}"]


def test_a_call_whose_input_came_with_its_start_reaches_the_typescript_sdk_blocked(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    final = ts_stream(make_gateway, upstream, INPUT_AT_START)["final"]
    assert final["stop_reason"] == "end_turn"
    assert [block["type"] for block in final["content"]] == ["text"]
    assert "blocked a call to tool 'bash'" in final["content"][0]["text"]


def test_every_kind_of_block_reaches_the_typescript_sdk_through_the_gate(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    final = ts_stream(make_gateway, upstream, GOOD)["final"]
    assert [block["type"] for block in final["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "tool_use",
    ]
    assert final["content"][2]["citations"] == [CITATION]
    assert final["content"][3]["input"] == {"query": "weather"}
    assert final["content"][5]["input"] == {"command": "ls"}
