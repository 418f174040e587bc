"""Issue 42: spend and rate limits per caller, through the real gateway with the official SDK.

Each gateway is the real app under uvicorn with a wall clock the test holds
(`WallClock`), so a window ends when the test says so; the SDK's own wait on
`retry-after` is the only waiting, about a second, never a test's sleep.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import boto3
import httpx2
import pytest
from policy_gateway import names, settings
from policy_gateway.app import create_app
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.cli.main import main

from .support.aws import AWSProxy
from .support.fake_bedrock import FakeBedrock
from .support.fake_upstream import MODEL, FakeUpstream, Reply, text_events
from .support.gateway import GatewayStdout
from .support.sdk import ask, both, client
from .support.servers import ROOT, ThreadedServer, free_port, gateway_process, serving

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
    upstream: FakeUpstream, upstream_url: str, budget_table: str, streaming: bool
) -> None:
    clock = WallClock()
    policy = document({"requests_per_minute": 60})
    with gateway(upstream_url, clock, policy, limits_table=budget_table) as server:
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


def table_item(table: str, caller: str, period: str) -> dict[str, int]:
    item = boto3.client("dynamodb").get_item(
        TableName=table, Key={"bucket": {"S": f"limits#{caller}#{period}"}}, ConsistentRead=True
    )
    return {
        name: int(value["N"])
        for name, value in item.get("Item", {}).items()
        if "N" in value and name != "expires_at"
    }


def caller_of(key: str) -> str:
    return key_caller(key.encode())


MINUTE_ITEM = f"minute:{int(MINUTE_START) // 60}"


@both
def test_a_token_limit_admits_by_estimate_and_reconciles_with_usage(
    upstream: FakeUpstream,
    upstream_url: str,
    budget_table: str,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    # The fake answers 10 input tokens, and 5 output as JSON, one per word as a stream.
    output = 2 if streaming else 5
    clock = WallClock()
    policy = document({"input_tokens_per_minute": 2000, "output_tokens_per_minute": 500})
    with gateway(upstream_url, clock, policy, limits_table=budget_table) as server:
        caller = client(server.url, api_key=CALLER_KEY)
        raw = caller.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=400,
            stream=streaming,
            messages=[{"role": "user", "content": "hi"}],
        )
        raw.parse()
        sent = len(upstream.requests[-1].body)
        # Admitted at its estimate: max_tokens of output, the body's bytes / 3 of input.
        assert raw.headers["anthropic-ratelimit-output-tokens-remaining"] == str(500 - 400)
        assert raw.headers["anthropic-ratelimit-input-tokens-remaining"] == str(
            2000 - -(-sent // 3)
        )
        # Reconciled once the call has ended (its line written), not before.
        assert gateway_stdout.call_lines(1)[0]["output_tokens"] == output
        # A second call of the same size would not fit the estimate, but fits what was used.
        raw = caller.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=400,
            stream=streaming,
            messages=[{"role": "user", "content": "hi"}],
        )
        raw.parse()
        assert raw.headers["anthropic-ratelimit-output-tokens-remaining"] == str(500 - output - 400)
        counted = caller.messages.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
        assert counted.input_tokens > 0
    # Stopped: what the gateway counted and had not reported is in the table now.
    assert table_item(budget_table, caller_of(CALLER_KEY), MINUTE_ITEM) == {
        "requests": 3,
        "input_tokens": 2 * 10,
        "output_tokens": 2 * output,
    }
    assert len(upstream.requests) == 3


def test_a_daily_spend_budget_refuses_the_next_call_naming_it_without_reading_the_table(
    upstream: FakeUpstream,
    upstream_url: str,
    aws_proxy: tuple[AWSProxy, str],
    budget_table: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy, aws_url = aws_proxy
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", aws_url)
    clock = WallClock()
    # A dollar per thousand tokens: each answer (10 in, 5 out) costs $0.015.
    prices = {MODEL: {"input": 1000, "output": 1000}}
    policy = document({"spend_per_day_usd": 0.1}, prices=prices)
    with gateway(upstream_url, clock, policy, limits_table=budget_table) as server:
        caller = client(server.url, api_key=CALLER_KEY)
        admitted = 0
        refused: anthropic.RateLimitError | None = None
        while refused is None and admitted < 10:
            try:
                ask(caller, False, max_tokens=16)
                admitted += 1
            except anthropic.RateLimitError as error:
                refused = error
        assert refused is not None
        message = refused.response.json()["error"]["message"]
        assert "spend_per_day_usd budget of $0.10" in message
        assert message.endswith("it resets at 2026-12-07T00:00:00Z.")
        assert 0 < admitted < 10
        assert len(upstream.requests) == admitted
        reads = len(proxy.operations)
        with pytest.raises(anthropic.RateLimitError):
            ask(caller, False, max_tokens=16)
        assert len(proxy.operations) == reads, "refused here, without asking the table"
        assert len(upstream.requests) == admitted
        # Another caller's budget is its own.
        ask(client(server.url, api_key=OTHER_KEY), False, max_tokens=16)
    day = table_item(budget_table, caller_of(CALLER_KEY), "day:2026-12-06")
    assert day["spend_microusd"] == admitted * 15_000
    assert day["requests"] == admitted


def test_two_gateway_processes_share_one_callers_window_and_callers_never_share(
    upstream: FakeUpstream, upstream_url: str, budget_table: str
) -> None:
    clock = WallClock()
    policy = document({"requests_per_minute": 10})
    with (
        gateway(upstream_url, clock, policy, limits_table=budget_table) as first,
        gateway(upstream_url, clock, policy, limits_table=budget_table) as second,
    ):
        one, two = client(first.url, api_key=CALLER_KEY), client(second.url, api_key=CALLER_KEY)
        for n in range(10):
            ask(one if n % 2 else two, False)
        for each in (one, two):
            with pytest.raises(anthropic.RateLimitError):
                ask(each, False)
        assert len(upstream.requests) == 10
        other = client(second.url, api_key=OTHER_KEY).messages.with_raw_response.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
        assert other.headers["anthropic-ratelimit-requests-remaining"] == "9"
        clock.now += 60
        ask(one, False)
        assert len(upstream.requests) == 12


@pytest.mark.parametrize("fault", ["throttled", "stopped"])
@pytest.mark.parametrize("on_error", ["allow", "refuse"])
def test_an_unavailable_table_follows_limits_on_error(
    upstream: FakeUpstream,
    upstream_url: str,
    aws_proxy: tuple[AWSProxy, str],
    budget_table: str,
    gateway_stdout: GatewayStdout,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    on_error: str,
) -> None:
    proxy, aws_url = aws_proxy
    if fault == "throttled":
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", aws_url)
        proxy.throttle(1.0)
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", f"http://127.0.0.1:{free_port()}")
    policy = document({"requests_per_minute": 60}, limits_on_error=on_error)
    with gateway(upstream_url, WallClock(), policy, limits_table=budget_table) as server:
        caller = client(server.url, api_key=CALLER_KEY)
        if on_error == "allow":
            assert ask(caller, False).content[0].type == "text"
            assert len(upstream.requests) == 1
        else:
            with pytest.raises(anthropic.InternalServerError) as refused:
                ask(caller, False)
            assert refused.value.status_code == 503
            assert "limits_on_error: refuse" in refused.value.response.json()["error"]["message"]
            assert upstream.requests == []
        assert gateway_stdout.counted(names.METRIC_LIMITS_UNAVAILABLE) >= 1


def test_usage_headers_and_refusals_are_one_counter_after_a_mixed_run(
    upstream: FakeUpstream,
    upstream_url: str,
    budget_table: str,
    gateway_stdout: GatewayStdout,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limits = {"requests_per_minute": 8, "output_tokens_per_minute": 5000, "tokens_per_day": 10**6}
    policy = document(limits)
    clock = WallClock()
    with gateway(upstream_url, clock, policy, limits_table=budget_table) as server:
        caller = client(server.url, api_key=CALLER_KEY)
        for calls, streaming in enumerate((False, True, False, True, False, True), start=1):
            ask(caller, streaming, max_tokens=32)
            gateway_stdout.call_lines(calls)
        caller.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        last = caller.messages.with_raw_response.create(
            model=MODEL, max_tokens=32, messages=[{"role": "user", "content": "hi"}]
        )
        last.parse()
        with pytest.raises(anthropic.RateLimitError) as refused:
            ask(caller, True, max_tokens=32)
        lines = gateway_stdout.call_lines(9)
    finished = [line for line in lines if line["status"] == 200]
    used_output = sum(line.get("output_tokens", 0) for line in finished)
    used_tokens = sum(
        line.get(name, 0) for line in finished for name in ("input_tokens", "output_tokens")
    )
    minute = table_item(budget_table, caller_of(CALLER_KEY), MINUTE_ITEM)
    day = table_item(budget_table, caller_of(CALLER_KEY), "day:2026-12-06")
    # The table counts what the call lines report, and the refusal came at the limit.
    assert minute["requests"] == 8 == limits["requests_per_minute"]
    assert minute["output_tokens"] == used_output
    assert day["tokens"] == used_tokens
    assert refused.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    # The last admitted call's headers: what was left once it was counted at its estimate.
    assert last.headers["anthropic-ratelimit-requests-remaining"] == "0"
    last_output = finished[-1]["output_tokens"]
    assert int(last.headers["anthropic-ratelimit-output-tokens-remaining"]) == (
        5000 - (used_output - last_output) - 32
    )
    # And `policy-gateway usage` reads the same counts.
    monkeypatch.setenv(settings.ENV_LIMITS_TABLE, budget_table)
    monkeypatch.setenv(settings.ENV_POLICY_CONFIG, policy)
    monkeypatch.setattr("time.time", lambda: MINUTE_START + 30)
    assert main(["usage", "--caller", caller_of(CALLER_KEY)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["limits"]["requests_per_minute"] == {
        "limit": 8,
        "used": 8,
        "remaining": 0,
        "resets": "2026-12-06T10:01:00Z",
    }
    assert report["limits"]["output_tokens_per_minute"]["used"] == used_output
    assert report["limits"]["tokens_per_day"]["used"] == used_tokens
    assert main(["usage", "--day"]) == 0
    (top,) = json.loads(capsys.readouterr().out)["callers"]
    assert top["caller"] == caller_of(CALLER_KEY)
    assert top["requests"] == 8
    assert top["spend_usd"] == pytest.approx(sum(line["usage_usd"] for line in finished), abs=1e-6)


def test_a_document_with_bad_limits_is_refused_as_a_bad_chain(
    upstream: FakeUpstream, upstream_url: str, gateway_stdout: GatewayStdout
) -> None:
    policy = document({"requests_per_minute": 0})
    with (
        gateway(upstream_url, WallClock(), policy) as server,
        pytest.raises(anthropic.InternalServerError),
    ):
        ask(client(server.url, api_key=CALLER_KEY), False)
    assert "limits.requests_per_minute must be a whole number of at least 1, got 0" in (
        gateway_stdout.text
    )
    assert upstream.requests == []


def test_a_batch_counts_a_request_at_creation_and_its_spend_at_the_batch_price_on_results(
    upstream: FakeUpstream,
    upstream_url: str,
    budget_table: str,
    gateway_stdout: GatewayStdout,
) -> None:
    policy = document({"requests_per_minute": 5})
    entry: Any = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    with gateway(upstream_url, WallClock(), policy, limits_table=budget_table) as server:
        caller = client(server.url, api_key=CALLER_KEY)
        created = caller.messages.batches.with_raw_response.create(
            requests=[{"custom_id": "a", "params": entry}, {"custom_id": "b", "params": entry}]
        )
        assert created.headers["anthropic-ratelimit-requests-remaining"] == "4"
        batch = created.parse()
        results = list(caller.messages.batches.results(batch.id))
        assert [result.custom_id for result in results] == ["a", "b"]
        fetched = gateway_stdout.call_lines(2)[-1]
    # Each entry: 10 input and 5 output tokens at $3 and $15 a million, half price.
    assert fetched["endpoint"] == "batch_results"
    assert fetched["usage_usd"] == pytest.approx(2 * 0.5 * (10 * 3 + 5 * 15) / 1e6)
    day = table_item(budget_table, caller_of(CALLER_KEY), "day:2026-12-06")
    assert day == {"requests": 1, "tokens": 2 * 15, "spend_microusd": 105}


@both
def test_bedrock_as_the_upstream_is_counted_the_same(
    bedrock: FakeBedrock,
    bedrock_env: dict[str, str],
    upstream_url: str,
    budget_table: str,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    policy = document({"requests_per_minute": 2, "output_tokens_per_minute": 1000})
    bedrock_settings = {
        "upstream_provider": settings.PROVIDER_BEDROCK,
        "bedrock_region": bedrock_env[settings.ENV_BEDROCK_REGION],
        "bedrock_endpoint_url": bedrock_env[settings.ENV_BEDROCK_ENDPOINT_URL],
        "bedrock_model_map": json.dumps({MODEL: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}),
    }
    with gateway(
        upstream_url, WallClock(), policy, limits_table=budget_table, **bedrock_settings
    ) as server:
        caller = client(server.url, api_key=CALLER_KEY)
        ask(caller, streaming, max_tokens=100)
        (line,) = gateway_stdout.call_lines(1)
        raw = caller.messages.with_raw_response.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
        raw.parse()
        assert raw.headers["anthropic-ratelimit-output-tokens-remaining"] == str(
            1000 - line["output_tokens"] - 100
        )
        with pytest.raises(anthropic.RateLimitError):
            ask(caller, streaming)
        assert len(bedrock.requests) == 2, "a refused call reaches no upstream"
    assert line["usage_usd"] == pytest.approx(
        (line["input_tokens"] * 3 + line["output_tokens"] * 15) / 1e6
    )


def test_a_cut_stream_reconciles_with_what_it_had_reported(
    upstream: FakeUpstream,
    upstream_url: str,
    budget_table: str,
    gateway_stdout: GatewayStdout,
) -> None:
    policy = document({"output_tokens_per_minute": 1000})
    with gateway(upstream_url, WallClock(), policy, limits_table=budget_table) as server:
        # Cut after message_start, a block's start and a ping: only message_start's usage.
        upstream.script(Reply(events=text_events(["one", "two", "three"]), break_after=3))
        caller = client(server.url, api_key=CALLER_KEY)
        with pytest.raises(anthropic.APIError):
            ask(caller, True, max_tokens=600)
        (line,) = gateway_stdout.call_lines(1)
        raw = caller.messages.with_raw_response.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
        raw.parse()
    # Admitted at 600, the cut stream counts the 5 its message_start reported.
    assert line["output_tokens"] == 5
    assert raw.headers["anthropic-ratelimit-output-tokens-remaining"] == str(1000 - 5 - 100)
    assert table_item(budget_table, caller_of(CALLER_KEY), MINUTE_ITEM)["output_tokens"] == 10


def test_the_readme_trips_a_limit_under_make_run(tmp_path: Path) -> None:
    """README's "Trip a limit": `make run`'s serve with its POLICY_CONFIG, then its curl loop."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Trip a limit") :]
    policy = re.search(r"POLICY_CONFIG='([^']+)' make run", section)
    curl = re.search(
        r"(http://127\.0\.0\.1:8080/v1/messages)((?: -H '[^']+')+) -d '([^']+)'; done", section
    )
    assert policy is not None
    assert curl is not None
    headers = dict(h.split(": ", 1) for h in re.findall(r"-H '([^']+)'", curl.group(2)))
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    env = {settings.ENV_POLICY_CONFIG: policy.group(1)}
    with gateway_process(env, stdout_path=tmp_path / "run.log", serve_args=serve_args) as (url, _):
        for _ in range(2):
            minute = time.time() // 60
            statuses = [
                httpx2.post(f"{url}/v1/messages", content=curl.group(3), headers=headers)
                for _ in range(4)
            ]
            if time.time() // 60 == minute:
                break
    assert [response.status_code for response in statuses] == [200, 200, 200, 429]
    assert "# 200 200 200 429" in section
    assert statuses[-1].headers["retry-after"]
    assert statuses[-1].headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert '"counted_in":"process"' in (tmp_path / "run.log").read_text()
