"""What an operator sees: EMF metrics on stdout and the fallback's WARNING.

These run the gateway as a child process, as Lambda would, and read what it
printed. What it sends to X-Ray (the spans and their annotations) is in
test_tracing.py.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest
from policy_gateway import names, settings
from policy_gateway.observability import tracing_settings

from .support.clock import eventually
from .support.fake_bedrock import FakeBedrock
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message
from .support.sdk import REPLACE, ask_text, sdk
from .support.servers import ROOT, gateway_process, json_lines
from .support.traces import XRayEndpoint, xray_header


def printed_json(path: Path) -> list[dict[str, Any]]:
    return json_lines(path.read_text())


def requests_counted(stdout: Path) -> int:
    emf = [line for line in printed_json(stdout) if "_aws" in line]
    return sum(len(line.get(names.METRIC_REQUESTS, [])) for line in emf)


def base_env(upstream_url: str) -> dict[str, str]:
    return {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_POLICY_CONFIG: REPLACE,
        settings.ENV_FLAG_TTL: "0",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }


def test_fallback_emits_emf_metric_with_service_dimension_and_a_warning(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    stdout = tmp_path / "gateway.out"
    with gateway_process(base_env(upstream_url), stdout_path=stdout) as (url, _):
        upstream.script(
            Reply.error(400, "invalid_request_error", "codename rejected"),
            Reply(body=message("echo: after a slow retry"), delay=0.5),
        )
        assert ask_text(sdk(url)).startswith("echo:")
        # The call's metrics and log line are printed after its answer is sent.
        eventually(lambda: any(names.METRIC_REQUESTS in line for line in printed_json(stdout)))
    printed = printed_json(stdout)
    emf = [line for line in printed if names.METRIC_FALLBACK in line]
    assert len(emf) == 1
    directive = emf[0]["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == names.METRICS_NAMESPACE
    assert directive["Dimensions"] == [["service"]]
    assert emf[0]["service"] == names.SERVICE_NAME
    assert emf[0][names.METRIC_FALLBACK] == [1.0]
    assert {"Name": names.METRIC_FALLBACK, "Unit": "Count"} in directive["Metrics"]
    # Flushed before the retry was sent, not when the call ended.
    assert emf[0]["_aws"]["Timestamp"] <= upstream.requests[1].received_at * 1000
    succeeded = [line for line in printed if names.METRIC_FALLBACK_SUCCEEDED in line]
    assert [line[names.METRIC_FALLBACK_SUCCEEDED] for line in succeeded] == [[1.0]]
    warnings = [line for line in printed if line.get("level") == "WARNING"]
    assert len(warnings) == 1
    warning = warnings[0]
    assert warning["fallback_status"] == 400
    assert warning["upstream_error_type"] == "invalid_request_error"
    assert warning["upstream_request_id"] == "req_fake_error"
    assert "codename rejected" not in stdout.read_text()
    assert warning["changed_paths"] == ["$.messages[0].content[0].text"]
    assert warning["changed_by_policy"] == {"string_replace": ["$.messages[0].content[0].text"]}
    assert warning["call_id"]
    assert "secret-project" not in stdout.read_text()


def test_ssm_outage_means_flag_off_and_requests_still_succeed(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
    env = {**base_env(upstream_url), "AWS_ENDPOINT_URL_SSM": dead_endpoint}
    stdout = tmp_path / "gateway.out"
    with gateway_process(env, stdout_path=stdout) as (url, _):
        client = sdk(url)
        assert ask_text(client).startswith("echo:")
        upstream.script(Reply.error(400, "invalid_request_error"))
        with pytest.raises(anthropic.BadRequestError):
            ask_text(client)
        assert len(upstream.requests) == 2
    warnings = [line for line in printed_json(stdout) if line.get("level") == "WARNING"]
    assert any("fallback flag unreadable" in w["message"] for w in warnings)


def test_every_call_flushes_request_metrics(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str
) -> None:
    stdout = tmp_path / "gateway.out"
    with gateway_process(base_env(upstream_url), stdout_path=stdout) as (url, _):
        client = sdk(url)
        ask_text(client)
        ask_text(client, stream=True)
        client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        eventually(lambda: requests_counted(stdout) == 3)
    emf = [line for line in printed_json(stdout) if "_aws" in line]
    assert sum(len(line.get(names.METRIC_REQUESTS, [])) for line in emf) == 3
    assert any(names.METRIC_TIME_TO_FIRST_EVENT in line for line in emf)
    for line in emf:
        (dimensions,) = line["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
        # Only the audit's metrics have more dimensions than the service (test_audit_trail.py).
        assert dimensions in (
            ["service"],
            ["service", names.DIMENSION_MODEL],
            ["service", names.DIMENSION_POLICY, names.DIMENSION_ACTION],
        )


def test_logs_and_metrics_name_the_service_the_stack_sets(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str
) -> None:
    env = {**base_env(upstream_url), settings.ENV_SERVICE_NAME: "edge-gw"}
    stdout = tmp_path / "gateway.out"
    with gateway_process(env, stdout_path=stdout) as (url, _):
        ask_text(sdk(url))
        eventually(lambda: requests_counted(stdout) == 1)
    printed = printed_json(stdout)
    (call_line,) = [line for line in printed if line.get("message") == "call finished"]
    assert call_line["service"] == "edge-gw"
    assert all(line["service"] == "edge-gw" for line in printed if "_aws" in line)


def test_bedrock_request_id_is_on_the_attempt_span_and_the_call_log_line(
    tmp_path: Path, bedrock: FakeBedrock, bedrock_env: dict[str, str], xray: XRayEndpoint
) -> None:
    env = {
        **base_env("http://127.0.0.1:9"),
        **bedrock_env,
        settings.ENV_POLICY_CONFIG: "",
        settings.ENV_LAMBDA_TASK_ROOT: str(tmp_path),
        tracing_settings.ENV_XRAY_DAEMON_ADDRESS: xray.address,
        tracing_settings.ENV_OTLP_ENDPOINT: "",
    }
    stdout = tmp_path / "gateway.out"
    with gateway_process(env, stdout_path=stdout) as (url, _):
        header, _, _ = xray_header()
        client = sdk(url, default_headers={"x-amzn-trace-id": header})
        reply = client.messages.with_raw_response.create(
            model="anthropic.claude-sonnet-4-5-20250929-v1:0",
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
        )
        request_id = reply.headers["request-id"]
        (attempt,) = xray.spans(expect=1)
    assert request_id.startswith("fake-bedrock-")
    assert bedrock.requests[0].signature_valid
    assert attempt.name == "upstream policy attempt 1"
    assert attempt.attributes[names.ATTRIBUTE_UPSTREAM_REQUEST_ID] == request_id
    # Shown with the span, not an annotation: the indexed set is the same as for Anthropic.
    assert attempt.annotations == {}
    (line,) = [line for line in printed_json(stdout) if line.get("message") == "call finished"]
    assert line["upstream_request_id"] == request_id
