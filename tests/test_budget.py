"""The per-caller fallback budget: shared across instances in DynamoDB, fail-closed, loud.

Gateways run as child processes or in-thread uvicorn servers, DynamoDB is the
session's moto server, the upstream is the fake, and the client is the
official SDK. Time is injected, never slept on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anthropic
import anyio
import boto3
import httpx2
import pytest
from botocore.config import Config
from policy_gateway import names, settings
from policy_gateway.app import create_app
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.fallback.budget import (
    REASON_BUDGET,
    REASON_UNAVAILABLE,
    FallbackBudget,
    InProcessStore,
)
from policy_gateway.fallback.budget_table import (
    WAIT_SECONDS,
    BudgetUnavailable,
    DynamoDBStore,
    dynamodb_client,
    read_usage,
    window_start,
)
from policy_gateway.lambda_context import from_headers
from starlette.types import Receive, Scope, Send

from .support.aws import AWSProxy
from .support.cfn import insight_rule_body
from .support.cli import cli, status_of
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import REJECTED, REPLACE, USER, reject_the_rewrite
from .support.servers import (
    ROOT,
    ThreadedServer,
    free_port,
    gateway_process,
    json_lines,
    lifespan_handled,
    serving,
)

WINDOW = 3600
CALLER_A = "sk-ant-caller-a-0123456789"
CALLER_B = "sk-ant-caller-b-9876543210"


@dataclass
class Clock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def strict(upstream: FakeUpstream, set_flag: Callable[[str], None]) -> FakeUpstream:
    """The flag on, and an upstream that enforces a context window and the thinking rule."""
    set_flag("true")
    upstream.rules = strict_api
    return upstream


@pytest.fixture
def rejecting(upstream: FakeUpstream, set_flag: Callable[[str], None]) -> FakeUpstream:
    """The flag on, and an upstream that refuses exactly the REPLACE chain's rewrite."""
    set_flag("true")
    upstream.rules = reject_the_rewrite
    return upstream


def client_for(url: str, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)


def call(url: str, key: str) -> tuple[int, dict[str, Any]]:
    """One request through the gateway: (status, JSON body)."""
    response = httpx2.post(
        f"{url}/v1/messages",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        json={"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": USER}]},
        timeout=30,
    )
    return response.status_code, response.json()


def emf_count(lines: list[dict[str, Any]], metric: str) -> int:
    return sum(len(line[metric]) for line in lines if "_aws" in line and metric in line)


# ------------------------------------------------------------------ pure parts


def test_windows_are_fixed_and_aligned() -> None:
    assert window_start(7199.9, 3600) == 3600
    assert window_start(7200.0, 3600) == 7200
    assert window_start(59.0, 60) == 0


def test_a_client_key_becomes_a_short_stable_digest_never_the_key() -> None:
    caller = key_caller(CALLER_A.encode())
    assert caller == key_caller(CALLER_A.encode())
    assert caller != key_caller(CALLER_B.encode())
    assert caller.startswith("key:")
    assert len(caller) == len("key:") + 16
    assert CALLER_A not in caller


def test_the_iam_principal_comes_from_the_function_url_request_context() -> None:
    arn = "arn:aws:iam::123456789012:user/alice"
    context = json.dumps({"requestId": "r-1", "authorizer": {"iam": {"userArn": arn}}})
    assert from_headers(None, context).iam_principal == arn
    assert from_headers(None, json.dumps({"requestId": "r-1"})).iam_principal is None
    assert from_headers(None, json.dumps({"authorizer": "odd"})).iam_principal is None


def test_in_process_budget_counts_per_caller_and_window() -> None:
    clock = Clock()
    budget = FallbackBudget(2, WINDOW, InProcessStore(), clock)
    assert [anyio.run(budget.allows, "a") for _ in range(3)] == [True, True, False]
    assert anyio.run(budget.allows, "b")
    clock.now += WINDOW
    assert anyio.run(budget.allows, "a")


def test_a_zero_budget_never_allows_a_fallback() -> None:
    budget = FallbackBudget(0, WINDOW, InProcessStore(), Clock())
    assert not anyio.run(budget.allows, "a")


def test_invalid_budget_settings_stop_the_gateway() -> None:
    with pytest.raises(ValueError, match=settings.ENV_FALLBACK_BUDGET):
        settings.Settings.from_env({settings.ENV_FALLBACK_BUDGET: "-1"})
    with pytest.raises(ValueError, match=settings.ENV_FALLBACK_BUDGET_WINDOW):
        settings.Settings.from_env({settings.ENV_FALLBACK_BUDGET_WINDOW: "0"})
    parsed = settings.Settings.from_env(
        {
            settings.ENV_FALLBACK_BUDGET: "0",
            settings.ENV_FALLBACK_BUDGET_WINDOW: "60",
            settings.ENV_FALLBACK_BUDGET_TABLE: "t",
        }
    )
    assert (parsed.fallback_budget, parsed.fallback_budget_window) == (0, 60)
    assert parsed.fallback_budget_table == "t"
    assert settings.Settings.from_env({}).fallback_budget_table is None


# ------------------------------------------------------- the store in DynamoDB


def test_dynamodb_store_counts_exactly_the_limit_then_a_new_window(budget_table: str) -> None:
    store = DynamoDBStore(budget_table)
    spent = [anyio.run(store.spend, "a", 0, 3, 7200) for _ in range(5)]
    assert spent == [True, True, True, False, False]
    assert anyio.run(store.spend, "b", 0, 3, 7200)
    assert anyio.run(store.spend, "a", 3600, 3, 10800)
    item = boto3.client("dynamodb").get_item(TableName=budget_table, Key={"bucket": {"S": "a#0"}})[
        "Item"
    ]
    assert item["used"] == {"N": "3"}
    assert item["expires_at"] == {"N": "7200"}
    assert item["caller"] == {"S": "a"}
    usage = read_usage(boto3.client("dynamodb"), budget_table, "a", 3, 3600, 100.0)
    assert usage.as_dict()["used"] == 3
    assert usage.as_dict()["remaining"] == 0


def test_dynamodb_store_without_its_table_is_unavailable() -> None:
    with pytest.raises(BudgetUnavailable, match="ResourceNotFoundException"):
        anyio.run(DynamoDBStore("no-such-table").spend, "a", 0, 3, 7200)


def test_dynamodb_store_that_cannot_connect_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(BudgetUnavailable, match=r"Timeout|EndpointConnectionError"):
        anyio.run(DynamoDBStore("t", dynamodb_client).spend, "a", 0, 3, 7200)

    def one_attempt() -> Any:
        return boto3.client("dynamodb", config=Config(retries={"total_max_attempts": 1}))

    # Without the retry's back-off inside the bound, the connection error itself shows.
    with pytest.raises(BudgetUnavailable, match="EndpointConnectionError"):
        anyio.run(DynamoDBStore("t", one_attempt).spend, "a", 0, 3, 7200)


# ------------------------------------ two gateway processes, one shared table


def process_env(upstream_url: str, table: str, budget: int) -> dict[str, str]:
    return {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_POLICY_CONFIG: REPLACE,
        settings.ENV_FLAG_TTL: "0",
        settings.ENV_FALLBACK_BUDGET: str(budget),
        settings.ENV_FALLBACK_BUDGET_TABLE: table,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }


def test_two_processes_share_one_budget_per_caller(
    tmp_path: Path,
    rejecting: FakeUpstream,
    upstream_url: str,
    budget_table: str,
) -> None:
    upstream = rejecting
    budget = 3
    env = process_env(upstream_url, budget_table, budget)
    outputs = [tmp_path / "one.out", tmp_path / "two.out"]
    with (
        gateway_process(env, stdout_path=outputs[0]) as (one, _),
        gateway_process(env, stdout_path=outputs[1]) as (two, _),
    ):
        outcomes = []
        for attempt in range(8):
            before = len(upstream.requests)
            status, body = call((one, two)[attempt % 2], CALLER_A)
            outcomes.append((status, len(upstream.requests) - before, body))
        served = [o for o in outcomes if o[0] == 200]
        refused = [o for o in outcomes if o[0] != 200]
        # Exactly the budget, across both processes: each a fallback (two attempts).
        assert len(served) == budget
        assert all(attempts == 2 for _, attempts, _ in served)
        assert outcomes[:budget] == served
        # Every later call: the upstream's 400, unchanged, after a single attempt.
        assert len(refused) == 8 - budget
        for status, attempts, body in refused:
            assert status == 400
            assert attempts == 1
            assert body == {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": REJECTED},
                "request_id": "req_fake_error",
            }
        # Another caller still has its whole budget, on either process.
        other = [call((two, one)[n % 2], CALLER_B)[0] for n in range(budget + 1)]
        assert other == [200] * budget + [400]
        usage = status_of(
            cli(
                "budget",
                key_caller(CALLER_A.encode()),
                env={
                    settings.ENV_FALLBACK_BUDGET_TABLE: budget_table,
                    settings.ENV_FALLBACK_BUDGET: str(budget),
                },
            )
        )
    assert usage["used"] == budget
    assert usage["remaining"] == 0
    assert usage["limit"] == budget
    printed = [line for path in outputs for line in json_lines(path.read_text())]
    assert emf_count(printed, names.METRIC_FALLBACK) == 2 * budget
    assert emf_count(printed, names.METRIC_FALLBACK_DENIED) == 8 - budget + 1
    denied = [
        line
        for line in printed
        if str(line.get("message", "")).startswith("passthrough fallback denied")
    ]
    assert len(denied) == 8 - budget + 1
    assert {line["caller"] for line in denied} == {
        key_caller(CALLER_A.encode()),
        key_caller(CALLER_B.encode()),
    }
    assert {line["reason"] for line in denied} == {REASON_BUDGET}
    assert all(line["level"] == "WARNING" for line in denied)
    fallbacks = [
        line
        for line in printed
        if str(line.get("message", "")).startswith("passthrough fallback: ")
    ]
    assert sorted(line["caller"] for line in fallbacks) == sorted(
        [key_caller(CALLER_A.encode())] * budget + [key_caller(CALLER_B.encode())] * budget
    )
    finished = [line for line in printed if line.get("message") == "call finished"]
    assert [line["fallback"] for line in finished].count("denied") == 8 - budget + 1
    for path in outputs:
        assert CALLER_A not in path.read_text()
        assert CALLER_B not in path.read_text()


def test_a_new_window_restores_the_budget_on_every_instance(
    rejecting: FakeUpstream,
    upstream_url: str,
    budget_table: str,
) -> None:
    clock = Clock()
    config = settings.Settings(
        upstream_base_url=upstream_url,
        upstream_max_retries=0,
        flag_ttl=0.2,
        policy_config=REPLACE,
        fallback_budget=2,
        fallback_budget_window=WINDOW,
        fallback_budget_table=budget_table,
    )
    # Two instances, each with its own DynamoDB client, one table, one clock.
    with serving(create_app(config, clock)) as first, serving(create_app(config, clock)) as second:
        one, two = first.url, second.url
        assert [call(url, CALLER_A)[0] for url in (one, two, one)] == [200, 200, 400]
        clock.now += WINDOW
        assert [call(url, CALLER_A)[0] for url in (two, one, two)] == [200, 200, 400]
        clock.now += WINDOW / 2
        assert call(one, CALLER_A)[0] == 400


# ------------------------------------------------------------ fail closed


class Throttling:
    """A DynamoDB endpoint that only ever answers ThrottlingException (or, stalled, nothing)."""

    def __init__(self, stall: float = 0.0) -> None:
        self.requests = 0
        self.stall = stall

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await lifespan_handled(scope, receive, send):
            return
        while (await receive()).get("more_body"):
            pass
        self.requests += 1
        await anyio.sleep(self.stall)
        body = json.dumps(
            {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/x-amz-json-1.0")],
            }
        )
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def dynamodb_endpoint(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    def point(url: str) -> None:
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", url)

    return point


@pytest.mark.parametrize("fault", ["unreachable", "throttled", "stalled", "no-table"])
def test_an_unavailable_table_means_no_fallback_and_the_upstream_error(
    make_gateway: GatewayFactory,
    rejecting: FakeUpstream,
    gateway_stdout: GatewayStdout,
    dynamodb_endpoint: Callable[[str], None],
    fault: str,
) -> None:
    upstream = rejecting
    servers: list[ThreadedServer] = []
    if fault == "unreachable":
        dynamodb_endpoint(f"http://127.0.0.1:{free_port()}")
    elif fault in ("throttled", "stalled"):
        servers.append(ThreadedServer(Throttling(stall=5.0 if fault == "stalled" else 0)).start())
        dynamodb_endpoint(servers[0].url)
    url = make_gateway(policy_config=REPLACE, fallback_budget_table="missing-or-unreachable")
    started = time.monotonic()
    try:
        status, body = call(url, CALLER_A)
        waited = time.monotonic() - started
    finally:
        for server in servers:
            server.stop()
    # However the table fails, the call waits at most about the budget's bound.
    assert waited < WAIT_SECONDS + 1.0
    assert status == 400
    assert body["error"] == {"type": "invalid_request_error", "message": REJECTED}
    assert len(upstream.requests) == 1
    output = gateway_stdout.until(lambda text: '"call finished"' in text)
    lines = json_lines(output)
    assert emf_count(lines, names.METRIC_FALLBACK_DENIED) == 1
    assert emf_count(lines, names.METRIC_FALLBACK) == 0
    (denied,) = [line for line in lines if line.get("reason")]
    assert denied["reason"] == REASON_UNAVAILABLE
    assert denied["caller"] == key_caller(CALLER_A.encode())
    assert denied["level"] == "WARNING"


def test_the_happy_path_makes_no_dynamodb_call(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    budget_table: str,
    moto_endpoint: str,
    set_flag: Callable[[str], None],
    dynamodb_endpoint: Callable[[str], None],
) -> None:
    set_flag("true")
    proxy = AWSProxy(moto_endpoint)
    with serving(proxy) as server:
        dynamodb_endpoint(server.url)
        url = make_gateway(policy_config=REPLACE, fallback_budget_table=budget_table)
        # Served calls, streaming or not, and errors that are no fallback: no DynamoDB call.
        client = client_for(url, CALLER_A)
        client.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": USER}]
        )
        with client.messages.stream(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": USER}]
        ) as stream:
            stream.get_final_text()
        upstream.script(Reply.error(429, "rate_limit_error"))
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": USER}]
            )
        assert proxy.operations == []
        upstream.rules = reject_the_rewrite
        assert call(url, CALLER_A)[0] == 200
    assert proxy.operations == ["DynamoDB_20120810.UpdateItem"]


# ------------------------------------------------------------- caller identity


def test_the_iam_principal_is_the_caller_on_the_call_and_fallback_lines(
    make_gateway: GatewayFactory,
    rejecting: FakeUpstream,
    gateway_stdout: GatewayStdout,
) -> None:
    arn = "arn:aws:sts::123456789012:assumed-role/agents/run-42"
    # As in Lambda, where only the adapter can set the request-context header.
    url = make_gateway(policy_config=REPLACE, fallback_budget=1, trust_lambda_context=True)
    context = json.dumps({"requestId": "url-req-1", "authorizer": {"iam": {"userArn": arn}}})
    statuses = [
        httpx2.post(
            f"{url}/v1/messages",
            headers={
                "x-api-key": key,
                "anthropic-version": "2023-06-01",
                "x-amzn-request-context": context,
            },
            json={"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": USER}]},
        ).status_code
        # Two different keys, one principal: one budget.
        for key in (CALLER_A, CALLER_B)
    ]
    assert statuses == [200, 400]
    lines = json_lines(gateway_stdout.until(lambda text: text.count('"call finished"') == 2))
    fallback = [
        line for line in lines if str(line.get("message")).startswith("passthrough fallback")
    ]
    role = "arn:aws:iam::123456789012:role/agents"
    assert [line["caller"] for line in fallback] == [role, role]
    assert [line["principal"] for line in fallback] == [arn, arn]
    finished = [line for line in lines if line.get("message") == "call finished"]
    assert [line["caller"] for line in finished] == [role, role]


# --------------------------------------------- who the Contributor Insights rule counts


def counted_by(rule: dict[str, Any], line: dict[str, Any]) -> bool:
    """Whether the rule's filters match a JSON log line (the operators the rule uses)."""
    for condition in rule["Contribution"]["Filters"]:
        operators = set(condition) - {"Match"}
        assert operators == {"StartsWith"}, f"teach this test {operators}"
        value = line.get(condition["Match"].removeprefix("$."))
        if not isinstance(value, str) or not value.startswith(tuple(condition["StartsWith"])):
            return False
    return True


def test_the_insight_rule_counts_fallback_and_denied_lines(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    set_flag: Callable[[str], None],
) -> None:
    rule = insight_rule_body()
    set_flag("true")
    upstream.rules = reject_the_rewrite
    url = make_gateway(policy_config=REPLACE, fallback_budget=1)
    assert [call(url, CALLER_A)[0] for _ in range(2)] == [200, 400]
    upstream.rules = None
    assert call(url, CALLER_A)[0] == 200
    lines = json_lines(gateway_stdout.until(lambda text: text.count('"call finished"') == 3))
    counted = [line for line in lines if counted_by(rule, line)]
    assert [line["level"] for line in counted] == ["WARNING", "WARNING"]
    assert counted[0]["message"].startswith("passthrough fallback: ")
    assert counted[1]["reason"] == REASON_BUDGET
    (key,) = rule["Contribution"]["Keys"]
    assert [line[key.removeprefix("$.")] for line in counted] == [key_caller(CALLER_A.encode())] * 2


def test_the_insight_rule_counts_a_repair_the_budget_denied(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    rule = insight_rule_body()
    chain = {
        "policies": [
            {
                "policy": "rewrite_model",
                "options": {"map": {MODEL: ["claude-retired-1", "claude-retired-2"]}},
            }
        ]
    }
    url = make_gateway(policy_config=json.dumps(chain), fallback_budget=0)
    upstream.script(Reply.error(404, "not_found_error"))
    assert call(url, CALLER_A)[0] == 404
    assert len(upstream.requests) == 1
    lines = json_lines(gateway_stdout.until(lambda text: '"call finished"' in text))
    (counted,) = [line for line in lines if counted_by(rule, line)]
    assert counted["message"].startswith("policy repair denied")
    assert (counted["reason"], counted["caller"]) == (REASON_BUDGET, key_caller(CALLER_A.encode()))


# ------------------------------------------------------------- the two attacks

CONTEXT_LIMIT = 2000  # tokens, at 4 characters a token
OPERATOR_PROMPT = "OPERATOR POLICY: answer only about our products. " + "Stay on topic. " * 260


def strict_api(body: dict[str, Any]) -> Reply | None:
    """The two API rules the attacks lean on: the context window and the thinking budget."""
    tokens = len(json.dumps([body.get("system"), body.get("messages")])) // 4
    if tokens > CONTEXT_LIMIT:
        return Reply.error(
            400,
            "invalid_request_error",
            f"prompt is too long: {tokens} tokens > {CONTEXT_LIMIT} maximum",
        )
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget_tokens = thinking.get("budget_tokens")
        if not isinstance(budget_tokens, int) or budget_tokens < 1024:
            return Reply.error(400, "invalid_request_error", "thinking.budget_tokens: >= 1024")
        if budget_tokens >= body["max_tokens"]:
            return Reply.error(
                400,
                "invalid_request_error",
                "`max_tokens` must be greater than `thinking.budget_tokens`",
            )
    return None


@dataclass
class Attempt:
    status: int
    upstream_bodies: list[dict[str, Any]]
    message: str


def attack(url: str, upstream: FakeUpstream, **params: Any) -> Attempt:
    before = len(upstream.requests)
    try:
        client_for(url, CALLER_A).messages.create(model=MODEL, **params)
        status, message = 200, ""
    except anthropic.APIStatusError as exc:
        status, message = exc.status_code, str(cast(Any, exc.body)["error"]["message"])
    return Attempt(status, [r.json for r in upstream.requests[before:]], message)


def test_prompt_padding_against_inject_system_prompt_stops_after_the_budget(
    make_gateway: GatewayFactory,
    strict: FakeUpstream,
    budget_table: str,
) -> None:
    upstream = strict
    chain = json.dumps(
        {"policies": [{"policy": "inject_system_prompt", "options": {"text": OPERATOR_PROMPT}}]}
    )
    url = make_gateway(policy_config=chain, fallback_budget=2, fallback_budget_table=budget_table)
    # Fits the context window on its own; with the operator's prompt it does not.
    padding = "lorem ipsum " * 500
    padded = {"max_tokens": 64, "messages": [{"role": "user", "content": padding + "go"}]}
    attempts = [attack(url, upstream, **padded) for _ in range(4)]
    for worked in attempts[:2]:
        assert worked.status == 200
        first, retry = worked.upstream_bodies
        assert first["system"].startswith("OPERATOR POLICY")
        assert "system" not in retry  # the operator's prompt was bypassed
    for stopped in attempts[2:]:
        assert stopped.status == 400
        assert stopped.message.startswith("prompt is too long")
        (only,) = stopped.upstream_bodies
        assert only["system"].startswith("OPERATOR POLICY")
    # Ordinary calls keep working, with the operator's prompt.
    normal = attack(url, upstream, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert normal.status == 200
    assert [body["system"][:15] for body in normal.upstream_bodies] == ["OPERATOR POLICY"]


def test_thinking_budget_against_cap_max_tokens_stops_after_the_budget(
    make_gateway: GatewayFactory,
    strict: FakeUpstream,
    budget_table: str,
) -> None:
    upstream = strict
    chain = json.dumps({"policies": [{"policy": "cap_max_tokens", "options": {"max": 1024}}]})
    url = make_gateway(policy_config=chain, fallback_budget=2, fallback_budget_table=budget_table)
    thinking = {
        "max_tokens": 16000,
        "thinking": {"type": "enabled", "budget_tokens": 8000},
        "messages": [{"role": "user", "content": "think hard"}],
    }
    attempts = [attack(url, upstream, **thinking) for _ in range(4)]
    for worked in attempts[:2]:
        assert worked.status == 200
        first, retry = worked.upstream_bodies
        assert first["max_tokens"] == 1024
        assert retry["max_tokens"] == 16000  # the cap was bypassed
    for stopped in attempts[2:]:
        assert stopped.status == 400
        assert "budget_tokens" in stopped.message
        (only,) = stopped.upstream_bodies
        assert only["max_tokens"] == 1024
    capped = attack(url, upstream, max_tokens=4000, messages=[{"role": "user", "content": "hi"}])
    assert capped.status == 200
    assert [body["max_tokens"] for body in capped.upstream_bodies] == [1024]
