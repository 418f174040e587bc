"""`policy-gateway logs`'s pure parts: a call line as one readable line, `--since` durations."""

from __future__ import annotations

import pytest
from policy_gateway.cli import logs
from policy_gateway.cli.call_lines import readable
from policy_gateway.cli.operator_errors import OperatorError

pytestmark = pytest.mark.unit


def test_a_call_line_reads_as_one_line_with_every_field() -> None:
    line = {
        "timestamp": "2026-01-01T12:00:00.123+00:00",
        "message": "call finished",
        "endpoint": "messages",
        "status": 403,
        "latency_ms": 41.2,
        "caller": "ops",
        "chain": "group:eng",
        "chain_version": "v3:1a2b3c4d",
        "model": "claude-sonnet-4-6",
        "input_tokens": 50,
        "output_tokens": 7,
        "fallback": "denied",
        "policy_actions": [
            {"policy": "block_tool_calls", "action": "block", "tool": "bash"},
            {"policy": "cap_max_tokens", "action": "cap", "shadow": True, "fields": ["a"]},
        ],
        "policy_actions_omitted": 4,
    }
    assert readable(line) == (
        "2026-01-01T12:00:00.123+00:00 403 messages 41ms caller=ops chain=group:eng@v3:1a2b3c4d "
        "model=claude-sonnet-4-6 tokens=50/7 fallback=denied | block_tool_calls block tool=bash; "
        'cap_max_tokens cap fields=["a"] [shadow]; +4 more'
    )
    bare = {"message": "call finished", "status": 401, "caller": None, "chain": None}
    assert readable(bare, "2026-01-01T00:00:00.000+00:00") == (
        "2026-01-01T00:00:00.000+00:00 401 caller=- chain=-"
    )


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("10m", 600), ("2h", 7200)])
def test_since_takes_a_duration(text: str, seconds: int) -> None:
    assert logs.since_seconds(text) == seconds


def test_since_refuses_what_is_not_a_duration() -> None:
    with pytest.raises(OperatorError, match="not a duration"):
        logs.since_seconds("yesterday")
