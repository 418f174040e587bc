"""Tracing on OpenTelemetry: what reaches X-Ray in Lambda, and an OTLP backend elsewhere.

The gateway runs as a child process. With LAMBDA_TASK_ROOT set it sends its
spans to a UDP socket of this test standing in for Lambda's X-Ray endpoint;
with OTEL_EXPORTER_OTLP_ENDPOINT set, to an OTLP/HTTP receiver on loopback.
Both decode the OTLP protobuf, as the backends do.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from policy_gateway import names, settings
from policy_gateway.observability import tracing_settings
from policy_gateway.observability.xray_udp import parse_daemon_address
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .support.client import HEADERS, request_body
from .support.clock import eventually
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message, text_events
from .support.sdk import REPLACE, ask_text, sdk
from .support.servers import (
    ROOT,
    free_port,
    gateway_process,
    json_lines,
    serving,
)
from .support.traces import (
    SPAN_KIND_INTERNAL,
    SPAN_KIND_SERVER,
    STATUS_ERROR,
    XRAY_ANNOTATIONS,
    OTLPReceiver,
    ReceivedSpan,
    XRayEndpoint,
    xray_header,
)


def lambda_env(upstream_url: str, endpoint: XRayEndpoint, tmp_path: Path) -> dict[str, str]:
    return {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_POLICY_CONFIG: REPLACE,
        settings.ENV_FLAG_TTL: "0",
        settings.ENV_LAMBDA_TASK_ROOT: str(tmp_path),
        tracing_settings.ENV_XRAY_DAEMON_ADDRESS: endpoint.address,
        tracing_settings.ENV_OTLP_ENDPOINT: "",
        "PYTHONPATH": str(ROOT),
    }


def traced_post(url: str, trace_header: str, *, stream: bool = False) -> httpx2.Response:
    return httpx2.post(
        f"{url}/v1/messages",
        json=request_body(stream=stream),
        headers={**HEADERS, "x-amzn-trace-id": trace_header},
        timeout=30,
    )


def attempts(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [span for span in spans if span.name.startswith("upstream ")]


# Lambda: spans to the X-Ray endpoint


def test_a_policy_repair_is_annotated_on_the_attempt_it_answers(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, xray: XRayEndpoint
) -> None:
    chain = {
        "policies": [
            {
                "policy": "rewrite_model",
                "options": {"map": {MODEL: ["claude-retired-1", "claude-live-2"]}},
            }
        ]
    }
    env = {
        **lambda_env(upstream_url, xray, tmp_path),
        settings.ENV_POLICY_CONFIG: json.dumps(chain),
    }
    header, _, _ = xray_header()
    with gateway_process(env) as (url, _):
        upstream.script(Reply.error(404, "not_found_error"))
        assert ask_text(sdk(url, default_headers={"x-amzn-trace-id": header})).startswith("echo:")
        spans = xray.spans(expect=2)
    assert [span.name for span in spans] == [
        "upstream policy attempt 1",
        "upstream repair attempt 1",
    ]
    failed, repaired = spans
    assert failed.annotations == {
        names.ANNOTATION_UPSTREAM_STATUS: 404,
        names.ANNOTATION_POLICY_REPAIR: "rewrite_model",
    }
    assert repaired.annotations == {}


def test_a_repair_before_sending_is_annotated_on_a_span_of_its_own(
    tmp_path: Path, upstream_url: str, xray: XRayEndpoint
) -> None:
    chain = {
        "policies": [{"policy": "string_replace", "options": {"replacements": [["drop me", ""]]}}]
    }
    env = {
        **lambda_env(upstream_url, xray, tmp_path),
        settings.ENV_POLICY_CONFIG: json.dumps(chain),
    }
    header, _, _ = xray_header()
    with gateway_process(env) as (url, _):
        reply = sdk(url, default_headers={"x-amzn-trace-id": header}).messages.create(
            model=MODEL,
            max_tokens=16,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "hello"},
                        {"type": "text", "text": "drop me"},
                    ],
                }
            ],
        )
        assert reply.content
        spans = xray.spans(expect=2)
    # The repair costs no upstream attempt: its span is the record, the attempt is plain.
    assert [span.name for span in spans] == ["policy repair", "upstream policy attempt 1"]
    repair, attempt = spans
    assert repair.annotations == {names.ANNOTATION_POLICY_REPAIR: "string_replace"}
    assert names.ANNOTATION_POLICY_REPAIR not in attempt.annotations


def test_fallback_makes_two_attempt_spans_under_the_function_with_typed_annotations(
    tmp_path: Path,
    upstream: FakeUpstream,
    upstream_url: str,
    set_flag: Callable[[str], None],
    xray: XRayEndpoint,
) -> None:
    set_flag("true")
    header, root, parent = xray_header()
    with gateway_process(lambda_env(upstream_url, xray, tmp_path)) as (url, _):
        upstream.script(Reply.error(404, "not_found_error"))
        assert ask_text(sdk(url, default_headers={"x-amzn-trace-id": header})).startswith("echo:")
        spans = xray.spans(expect=2)
    assert [span.name for span in spans] == [
        "upstream policy attempt 1",
        "upstream passthrough-fallback attempt 1",
    ]
    for span in spans:
        assert span.xray_trace_id == root
        assert span.parent_span_id == parent
        # Not a client span: X-Ray keeps it a subsegment of the function, not a
        # service-map node per attempt.
        assert span.kind == SPAN_KIND_INTERNAL
        assert span.resource["service.name"] == names.SERVICE_NAME
    failed, retry = spans
    annotations = failed.annotations
    assert annotations == {
        names.ANNOTATION_UPSTREAM_STATUS: 404,
        names.ANNOTATION_FALLBACK: True,
        names.ANNOTATION_FALLBACK_STATUS: 404,
        names.ANNOTATION_FALLBACK_POLICIES: "string_replace",
        names.ANNOTATION_FALLBACK_SCOPE: "full",
    }
    # Types as X-Ray indexes them: `annotation.passthrough_fallback = true` is a
    # boolean match, `annotation.fallback_status = 404` a numeric one.
    assert type(annotations[names.ANNOTATION_FALLBACK]) is bool
    assert type(annotations[names.ANNOTATION_FALLBACK_STATUS]) is int
    assert type(annotations[names.ANNOTATION_FALLBACK_POLICIES]) is str
    assert retry.annotations == {}
    assert XRAY_ANNOTATIONS not in retry.attributes
    # The upstream's request id on each attempt, shown with it but not indexed.
    assert failed.attributes[names.ATTRIBUTE_UPSTREAM_REQUEST_ID] == "req_fake_error"
    assert retry.attributes[names.ATTRIBUTE_UPSTREAM_REQUEST_ID] == "req_fake"


def test_one_span_per_attempt_including_retries_and_streams(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, xray: XRayEndpoint
) -> None:
    env = {**lambda_env(upstream_url, xray, tmp_path), settings.ENV_UPSTREAM_MAX_RETRIES: "1"}
    plain, plain_root, _ = xray_header()
    retried, retried_root, _ = xray_header()
    streamed, streamed_root, _ = xray_header()
    with gateway_process(env) as (url, _):
        assert traced_post(url, plain).status_code == 200
        upstream.script(
            Reply.error(529, "overloaded_error", "busy"),
            Reply(body=message("after a retry"), headers={"retry-after-ms": "1"}),
        )
        assert traced_post(url, retried).status_code == 200
        upstream.script(Reply(events=text_events(["one ", "two"]), event_delay=0.05))
        assert traced_post(url, streamed, stream=True).status_code == 200
        spans = xray.spans(expect=4)
    by_trace: dict[str, list[str]] = {}
    for span in spans:
        by_trace.setdefault(span.xray_trace_id, []).append(span.name)
    assert by_trace == {
        plain_root: ["upstream policy attempt 1"],
        retried_root: ["upstream policy attempt 1", "upstream policy attempt 2"],
        streamed_root: ["upstream policy attempt 1"],
    }
    first_try = next(s for s in spans if s.xray_trace_id == retried_root)
    assert first_try.annotations == {names.ANNOTATION_UPSTREAM_STATUS: 529}


def test_unreachable_upstream_marks_each_attempt_failed_by_error_type_only(
    tmp_path: Path, xray: XRayEndpoint
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}"
    env = {
        **lambda_env(nowhere, xray, tmp_path),
        settings.ENV_UPSTREAM_MAX_RETRIES: "1",
        settings.ENV_UPSTREAM_CONNECT_TIMEOUT: "1",
    }
    header, root, _ = xray_header()
    with gateway_process(env) as (url, _):
        assert traced_post(url, header).status_code == 502
        spans = xray.spans(expect=2)
    assert [span.name for span in spans] == [
        "upstream policy attempt 1",
        "upstream policy attempt 2",
    ]
    for span in spans:
        assert span.xray_trace_id == root
        assert span.status == STATUS_ERROR
        # The exception's type, never its message (it may quote the upstream URL).
        assert span.attributes == {"error.type": "ConnectError"}


def test_unsampled_or_missing_trace_header_sends_nothing(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, xray: XRayEndpoint
) -> None:
    unsampled, _, _ = xray_header(sampled="0")
    sampled, root, _ = xray_header()
    with gateway_process(lambda_env(upstream_url, xray, tmp_path)) as (url, _):
        for headers in (HEADERS, {**HEADERS, "x-amzn-trace-id": unsampled}):
            response = httpx2.post(f"{url}/v1/messages", json=request_body(), headers=headers)
            assert response.status_code == 200
        # A sampled call after them shows the endpoint was listening all along.
        assert traced_post(url, sampled).status_code == 200
        # Datagrams of the first two calls would have arrived before this one's.
        spans = xray.spans(expect=1)
    assert [span.xray_trace_id for span in spans] == [root]


async def _slow_and_strict(request: Request) -> Response:
    """An upstream that answers slowly and rejects any body the policy changed."""
    body = await request.body()
    await asyncio.sleep(0.3)
    if b"[codename]" in body:
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
        return JSONResponse(error, status_code=400)
    return JSONResponse(message("ok"))


def test_concurrent_calls_each_land_under_their_own_trace(
    tmp_path: Path, set_flag: Callable[[str], None], xray: XRayEndpoint
) -> None:
    calls = 50
    headers = [xray_header() for _ in range(calls)]
    set_flag("true")

    async def fire(url: str) -> list[int]:
        async with httpx2.AsyncClient(timeout=60) as client:
            responses = await asyncio.gather(
                *(
                    client.post(
                        f"{url}/v1/messages",
                        json=request_body(f"call {index} about secret-project"),
                        headers={**HEADERS, "x-amzn-trace-id": header},
                    )
                    for index, (header, _, _) in enumerate(headers)
                )
            )
        return [response.status_code for response in responses]

    # Every call falls back, so its second attempt starts after an await,
    # while the other calls' contexts are live in the same process.
    strict = Starlette(routes=[Route("/v1/messages", _slow_and_strict, methods=["POST"])])
    with serving(strict) as upstream:
        # One caller makes every call: the budget must not be what ends them.
        env = {**lambda_env(upstream.url, xray, tmp_path), settings.ENV_FALLBACK_BUDGET: str(calls)}
        with gateway_process(env) as (url, _):
            assert asyncio.run(fire(url)) == [200] * calls
            spans = xray.spans(expect=2 * calls)
    under: dict[tuple[str, str], list[ReceivedSpan]] = {}
    for span in spans:
        under.setdefault((span.xray_trace_id, span.parent_span_id), []).append(span)
    assert sorted(under) == sorted((root, parent) for _, root, parent in headers)
    for pair in under.values():
        assert [span.name for span in pair] == [
            "upstream policy attempt 1",
            "upstream passthrough-fallback attempt 1",
        ]
        assert pair[0].annotations[names.ANNOTATION_FALLBACK] is True


# Outside Lambda: OTLP/HTTP when an endpoint is named, nothing otherwise


def otlp_env(upstream_url: str, **extra: str) -> dict[str, str]:
    return {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_POLICY_CONFIG: REPLACE,
        settings.ENV_FLAG_TTL: "0",
        settings.ENV_LAMBDA_TASK_ROOT: "",
        # Export within a tenth of a second instead of the SDK's 5 s batch delay.
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


def test_otlp_endpoint_receives_a_call_span_with_the_attempts_under_it(
    tmp_path: Path,
    upstream: FakeUpstream,
    upstream_url: str,
    set_flag: Callable[[str], None],
    otlp: tuple[OTLPReceiver, str],
) -> None:
    receiver, endpoint = otlp
    set_flag("true")
    caller_trace, caller_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    env = otlp_env(
        upstream_url,
        **{
            tracing_settings.ENV_OTLP_ENDPOINT: endpoint,
            tracing_settings.ENV_OTEL_SERVICE_NAME: "gw-under-test",
        },
    )
    stdout = tmp_path / "gateway.out"
    with gateway_process(env, stdout_path=stdout) as (url, _):
        upstream.script(Reply.error(400, "invalid_request_error"))
        client = sdk(url, default_headers={"traceparent": f"00-{caller_trace}-{caller_span}-01"})
        assert ask_text(client).startswith("echo:")
        assert ask_text(sdk(url)).startswith("echo:")
        spans = receiver.spans(expect=5)
    assert b'"tracing on"' in stdout.read_bytes()
    assert len(spans) == 5
    assert {span.resource["service.name"] for span in spans} == {"gw-under-test"}
    calls = [span for span in spans if span.kind == SPAN_KIND_SERVER]
    assert [span.name for span in calls] == ["POST /v1/messages"] * 2
    continued, started = sorted(calls, key=lambda span: span.trace_id != caller_trace)
    # The caller's W3C context parents the first call; the second starts a
    # trace whose id X-Ray would accept (its first 8 hex digits are the time).
    assert (continued.trace_id, continued.parent_span_id) == (caller_trace, caller_span)
    assert started.parent_span_id == ""
    assert abs(int(started.trace_id[:8], 16) - time.time()) < 600
    for call in calls:
        assert call.attributes["http.response.status_code"] == 200
    under = {
        call.span_id: [s.name for s in spans if s.parent_span_id == call.span_id] for call in calls
    }
    assert under[continued.span_id] == [
        "upstream policy attempt 1",
        "upstream passthrough-fallback attempt 1",
    ]
    assert under[started.span_id] == ["upstream policy attempt 1"]
    failed = next(s for s in attempts(spans) if s.parent_span_id == continued.span_id)
    assert failed.annotations[names.ANNOTATION_FALLBACK] is True
    assert failed.annotations[names.ANNOTATION_FALLBACK_STATUS] == 400
    assert all(path == "/v1/traces" for path, _, _ in receiver.requests)
    assert {headers["content-type"] for _, headers, _ in receiver.requests} == {
        "application/x-protobuf"
    }


def test_call_spans_are_named_by_method_and_route_template_never_by_path(
    upstream: FakeUpstream, upstream_url: str, otlp: tuple[OTLPReceiver, str]
) -> None:
    receiver, endpoint = otlp
    env = otlp_env(upstream_url, **{tracing_settings.ENV_OTLP_ENDPOINT: endpoint})
    calls = [
        ("GET", "/v1/models/claude-sonnet-4-5", "/v1/models/{model_id}"),
        ("DELETE", "/v1/messages/batches/msgbatch_0123", "/v1/messages/batches/{message_batch_id}"),
        ("POST", "/v1/messages", "/v1/messages"),
    ]
    with gateway_process(env) as (url, _):
        for method, path, _ in calls:
            body = request_body() if method == "POST" else None
            httpx2.request(method, f"{url}{path}", json=body, headers=HEADERS, timeout=30)
        spans = receiver.spans(expect=2 * len(calls))
    servers = [span for span in spans if span.kind == SPAN_KIND_SERVER]
    assert sorted(
        (span.name, span.attributes["http.request.method"], span.attributes["http.route"])
        for span in servers
    ) == sorted((f"{method} {route}", method, route) for method, _, route in calls)


# Imported by the interpreter at start-up from a test-only PYTHONPATH entry: the
# OTLP/HTTP exporter then fails to import exactly as when it is not installed.
_NO_OTLP_EXPORTER = """
import sys

class NoOtlpHttpExporter:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("opentelemetry.exporter.otlp.proto.http"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoOtlpHttpExporter())
"""


def without_the_otlp_exporter(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(_NO_OTLP_EXPORTER)
    # The rest of PYTHONPATH is kept: a checkout other than the installed one runs its own code.
    paths = [
        str(tmp_path),
        str(ROOT),
        *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
    ]
    return {**os.environ, **env, "PYTHONPATH": os.pathsep.join(paths)}


def test_serve_without_the_otlp_exporter_refuses_to_start_with_one_line(
    tmp_path: Path, upstream_url: str
) -> None:
    env = otlp_env(upstream_url, **{tracing_settings.ENV_OTLP_ENDPOINT: "http://127.0.0.1:9"})
    command = [sys.executable, "-m", "policy_gateway", "serve", "--port", str(free_port())]
    result = subprocess.run(
        command,
        env=without_the_otlp_exporter(tmp_path, env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("policy-gateway serve: ")
    assert tracing_settings.ENV_OTLP_ENDPOINT in line
    assert f"pip install 'policy-gateway[{tracing_settings.OTLP_EXTRA}]'" in line


@pytest.mark.parametrize(
    ("where", "outcome"),
    [
        ({tracing_settings.ENV_OTLP_ENDPOINT: "http://127.0.0.1:9"}, "ExporterMissing"),
        # Lambda sends over UDP: the exporter is not needed, and not asked for.
        (
            {
                tracing_settings.ENV_OTLP_ENDPOINT: "http://127.0.0.1:9",
                settings.ENV_LAMBDA_TASK_ROOT: "/",
            },
            "created",
        ),
        ({tracing_settings.ENV_OTLP_ENDPOINT: ""}, "created"),
    ],
    ids=["otlp", "in-lambda", "tracing-off"],
)
def test_the_app_is_not_created_when_its_spans_could_not_be_sent(
    tmp_path: Path, upstream_url: str, where: dict[str, str], outcome: str
) -> None:
    code = (
        "from policy_gateway import app\n"
        "from policy_gateway.observability import tracing_settings\n"
        "try:\n"
        "    app.create_app()\n"
        "except tracing_settings.ExporterMissing:\n"
        "    print('ExporterMissing')\n"
        "else:\n"
        "    print('created')\n"
    )
    env = otlp_env(upstream_url, **where)
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=without_the_otlp_exporter(tmp_path, env),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == outcome


def test_the_otlp_extra_installs_the_exporter_the_check_imports() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (requirement,) = extras[tracing_settings.OTLP_EXTRA]
    assert requirement.startswith("opentelemetry-exporter-otlp-proto-http")
    assert tracing_settings.OTLP_EXPORTER_MODULE.startswith(
        "opentelemetry.exporter.otlp.proto.http."
    )


def test_without_an_otlp_endpoint_nothing_is_sent(
    tmp_path: Path,
    upstream: FakeUpstream,
    upstream_url: str,
    otlp: tuple[OTLPReceiver, str],
) -> None:
    receiver, endpoint = otlp
    # Everything but the endpoint names the receiver: the service, the headers
    # (a backend's API key would go there), a caller's trace context.
    env = otlp_env(
        upstream_url,
        **{
            tracing_settings.ENV_OTLP_ENDPOINT: "",
            tracing_settings.ENV_OTLP_TRACES_ENDPOINT: "",
            tracing_settings.ENV_OTEL_SERVICE_NAME: "gw-under-test",
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-receiver={endpoint}",
        },
    )
    stdout = tmp_path / "gateway.out"
    trace_header, _, _ = xray_header()
    with gateway_process(env, stdout_path=stdout) as (url, process):
        headers = {"traceparent": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"}
        assert ask_text(sdk(url, default_headers=headers)).startswith("echo:")
        assert ask_text(sdk(url, default_headers={"x-amzn-trace-id": trace_header})).startswith(
            "echo"
        )
        # A batch exporter would flush at exit: stop the gateway before looking.
        process.terminate()
        process.wait(timeout=10)
    assert receiver.requests == []
    assert b"tracing on" not in stdout.read_bytes()


# The rules, unit by unit


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "OTEL_SDK_DISABLED": "true"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "TRUE"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "OTEL_SDK_DISABLED": "false"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "1"}, False),
    ],
)
def test_tracing_is_on_in_lambda_or_with_an_otlp_endpoint(env: dict[str, str], on: bool) -> None:
    assert tracing_settings.TracingSettings.from_env(env).enabled is on


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("169.254.79.129:2000", ("169.254.79.129", 2000)),
        ("tcp:127.0.0.1:2000 udp:127.0.0.2:2001", ("127.0.0.2", 2001)),
        (" localhost:2000 ", ("localhost", 2000)),
        ("[::1]:2000", ("::1", 2000)),
    ],
)
def test_daemon_address_forms(value: str, address: tuple[str, int]) -> None:
    assert parse_daemon_address(value) == address


@pytest.mark.parametrize(
    "value", ["", "2000", "host:", "host:port", "host:70000", "tcp:127.0.0.1:2000"]
)
def test_bad_daemon_address_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="address"):
        parse_daemon_address(value)


def test_bad_daemon_address_turns_tracing_off_not_the_gateway(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, xray: XRayEndpoint
) -> None:
    env = {
        **lambda_env(upstream_url, xray, tmp_path),
        tracing_settings.ENV_XRAY_DAEMON_ADDRESS: "nope",
    }
    header, _, _ = xray_header()
    stdout = tmp_path / "gateway.out"
    with gateway_process(env, stdout_path=stdout) as (url, _):
        assert ask_text(sdk(url, default_headers={"x-amzn-trace-id": header})).startswith("echo:")
    assert b"tracing off" in stdout.read_bytes()
    assert xray.drain() == []


def test_service_name_defaults_to_the_metric_service() -> None:
    assert settings.service_name({}) == names.SERVICE_NAME
    assert settings.service_name({settings.ENV_SERVICE_NAME: "edge-gw"}) == "edge-gw"


# Joining logs and traces


def call_lines(stdout: Path) -> list[dict[str, Any]]:
    return [
        line for line in json_lines(stdout.read_text()) if line.get("message") == "call finished"
    ]


def test_in_lambda_the_call_line_names_the_x_ray_trace(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, xray: XRayEndpoint
) -> None:
    header, root, _ = xray_header()
    stdout = tmp_path / "gateway.out"
    with gateway_process(lambda_env(upstream_url, xray, tmp_path), stdout_path=stdout) as (url, _):
        assert traced_post(url, header).status_code == 200
        assert httpx2.post(f"{url}/v1/messages", json=request_body(), headers=HEADERS).is_success
        xray.spans(expect=1)
        eventually(lambda: len(call_lines(stdout)) == 2)
    traced, untraced = call_lines(stdout)
    assert traced["trace_id"] == root
    assert "trace_id" not in untraced


def test_with_otlp_the_call_span_carries_the_call_id_and_the_line_its_trace(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, otlp: tuple[OTLPReceiver, str]
) -> None:
    receiver, endpoint = otlp
    stdout = tmp_path / "gateway.out"
    env = otlp_env(upstream_url, **{tracing_settings.ENV_OTLP_ENDPOINT: endpoint})
    with gateway_process(env, stdout_path=stdout) as (url, _):
        assert ask_text(sdk(url)).startswith("echo:")
        spans = receiver.spans(expect=2)
        eventually(lambda: len(call_lines(stdout)) == 1)
    (line,) = call_lines(stdout)
    (server,) = [span for span in spans if span.kind == SPAN_KIND_SERVER]
    assert server.attributes[names.ATTRIBUTE_CALL_ID] == line["call_id"]
    assert line["trace_id"] == server.trace_id
