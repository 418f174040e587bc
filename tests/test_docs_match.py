"""The docs' Logs Insights queries and log and metric examples, against what the gateway prints.

Every query in README.md and docs/*.md is fenced as ```logs-insights; each runs (through
tests/support/logs_insights.py) on the lines a real gateway printed while it went through
the scenario the query is for, and must find that scenario's line. Every documented log line
and EMF document must be a subset of a line the gateway printed of the same kind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from policy_gateway import settings
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.policy_source import chain_version

from .support.client import HEADERS, policy_chain, request_body
from .support.clock import ManualClock
from .support.docs import QUERIES, documented_lines, fenced
from .support.fake_upstream import FakeUpstream, Reply, message
from .support.gateway import GatewayFactory, GatewayStdout
from .support.logs_insights import Query, Record, records
from .support.sdk import REPLACE, reject_the_rewrite

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
BASH = {"tool": "^bash$"}
PARAMETER = settings.DEFAULT_POLICY_CONFIG_PARAMETER
TTL = 0.5
WALKTHROUGH = policy_chain(("redact_secrets", {}), ("block_tool_calls", {"rules": [BASH]}))
FAILING = policy_chain(("tests.support.faulty_policies:ExplodeOnRequest", {}))


LIMITED_CALLER = key_caller(HEADERS["x-api-key"].encode())
WALKTHROUGH_VERSION = chain_version(WALKTHROUGH, None)
FAILING_VERSION = chain_version(FAILING, None)

# What each documented query must find: a phrase of the query, a row it must return, and
# how many rows it returns when that is part of being right (None: any number).
EXPECTED: list[tuple[str, dict[str, Any], int | None]] = [
    ('"action":"block","tool"', {"tool": "bash", "chain_version": WALKTHROUGH_VERSION}, 1),
    ("changed_paths.0", {"fallback_status": 400, "changed_paths.0": "$.messages[0].content"}, 1),
    ("by caller, reason", {"reason": "budget", "count(*)": 1}, 2),
    ("kept_last_good", {"message": "policy chain loaded", "kept_last_good": True}, None),
    ("by policy, hook", {"policy": "ExplodeOnRequest", "hook": "on_request", "count(*)": 1}, 1),
    ("by chain_version", {"chain_version": FAILING_VERSION, "count(*)": 1}, 1),
    ("status >= 500", {"status": 500, "endpoint": "messages", "count(*)": 1}, 2),
    ('"shadow":true', {"policy": "block_tool_calls", "action": "block", "chain": "default"}, 1),
    # The fake's answer: 10 input and 5 output tokens of a Sonnet at $3 and $15 a million.
    ("sum(usage_usd)", {"caller": LIMITED_CALLER, "spend_usd": 0.000105}, 1),
]


def tool_reply(tool: str, args: dict[str, Any]) -> Reply:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "let me"},
        {"type": "tool_use", "id": "toolu_1", "name": tool, "input": args},
    ]
    body = message("", content=content) | {"stop_reason": "tool_use"}
    return Reply(body=body, headers={"request-id": "req_walkthrough"})


def post(url: str, text: str = "hello", **extra: Any) -> int:
    response = httpx2.post(
        f"{url}/v1/messages", json=request_body(text, **extra), headers=HEADERS, timeout=30
    )
    return response.status_code


def run_the_scenarios(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    ssm: Any,
    clock: ManualClock,
) -> None:
    """A block and a redaction, a fallback then one the budget denies, a bad chain kept out,
    a failing policy (a 500), a shadow block: each what one documented query looks for."""
    url = make_gateway(policy_config=WALKTHROUGH)
    upstream.script(tool_reply("bash", {"command": "rm -rf /tmp/x"}))
    assert post(url, f"the deploy key is {AWS_KEY}") == 200

    set_flag("true")
    upstream.rules = reject_the_rewrite
    url = make_gateway(policy_config=REPLACE, fallback_budget=1)
    assert [post(url, "tell me about secret-project") for _ in range(2)] == [200, 400]
    upstream.rules = None

    good = policy_chain(("cap_max_tokens", {"max": 100}))
    ssm.put_parameter(Name=PARAMETER, Value=good, Type="String", Overwrite=True)
    url = make_gateway(policy_config_parameter=PARAMETER, policy_config_ttl=TTL, clock=clock)
    assert post(url) == 200
    ssm.put_parameter(Name=PARAMETER, Value="{not json", Type="String", Overwrite=True)
    clock.advance(TTL + 0.1)
    assert post(url) == 200

    assert post(make_gateway(policy_config=FAILING)) == 500
    upstream.script(Reply.error(529, "overloaded_error"))
    assert post(make_gateway()) == 529

    shadow = {
        "policies": [{"policy": "block_tool_calls", "options": {"rules": [BASH]}, "mode": "shadow"}]
    }
    url = make_gateway(policy_config=json.dumps(shadow))
    upstream.script(tool_reply("bash", {"command": "ls"}))
    assert post(url) == 200

    limited = {"policies": [], "limits": {"requests_per_minute": 60}}
    assert post(make_gateway(policy_config=json.dumps(limited))) == 200


@pytest.fixture
def printed(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    set_flag: Callable[[str], None],
    ssm: Any,
    clock: ManualClock,
) -> list[Record]:
    run_the_scenarios(make_gateway, upstream, set_flag, ssm, clock)
    return records(gateway_stdout.until(lambda text: text.count('"call finished"') >= 9))


def test_every_documented_query_finds_its_scenarios_line(printed: list[Record]) -> None:
    failures = []
    queries = list(fenced(QUERIES))
    assert len(queries) == len(EXPECTED), "a new query needs its scenario and row in EXPECTED"
    for where, _, text in queries:
        query = Query(text)
        (wanted, count) = next((row, n) for phrase, row, n in EXPECTED if phrase in text)
        rows = query.run(printed)
        if not any(wanted.items() <= row.items() for row in rows):
            failures.append(f"{where}: wanted a row with {wanted}, got {rows}")
        if count is not None and len(rows) != count:
            failures.append(f"{where}: wanted {count} rows, got {rows}")
        if query.unseen(printed):
            failures.append(f"{where}: no line it finds has {query.unseen(printed)}")
    assert failures == []


def same_kind(shown: dict[str, Any], line: Record) -> bool:
    if "_aws" in shown:
        if "_aws" not in line:
            return False
        (declared,) = shown["_aws"]["CloudWatchMetrics"]
        (real,) = line["_aws"]["CloudWatchMetrics"]
        metrics = [metric["Name"] for metric in declared["Metrics"]]
        return bool(declared["Dimensions"] == real["Dimensions"]) and all(
            m in line for m in metrics
        )
    return bool(line.get("message") == shown["message"])


def keys_within(shown: Any, real: Any) -> bool:
    """Every key the example shows is in the real line, down through objects and lists."""
    if isinstance(shown, dict):
        return isinstance(real, dict) and all(
            key in real and keys_within(value, real[key]) for key, value in shown.items()
        )
    if isinstance(shown, list):
        return isinstance(real, list) and all(
            any(keys_within(item, candidate) for candidate in real) for item in shown
        )
    return True


def test_every_documented_log_line_and_metric_has_a_real_line_of_its_kind(
    printed: list[Record],
) -> None:
    failures = []
    for where, shown in documented_lines():
        kind = [line for line in printed if same_kind(shown, line)]
        if not any(keys_within(shown, line) for line in kind):
            failures.append(f"{where}: {json.dumps(shown)[:120]} (of its kind: {len(kind)})")
    assert failures == []
