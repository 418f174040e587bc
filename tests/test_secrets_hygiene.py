"""No credential or request content in any log line or trace; headers cleaned on the way up.

The gateway runs as a child process with every byte of its stdout and stderr captured, and
with tracing on (LAMBDA_TASK_ROOT set) sending its spans to a UDP socket of this test that
stands in for Lambda's X-Ray endpoint.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import httpx2
import pytest

from .support.client import HEADERS, request_body
from .support.fake_upstream import FakeUpstream, Reply
from .support.gateway import GatewayFactory
from .support.servers import gateway_process
from .support.traces import XRayEndpoint

PLANTED = uuid.uuid4().hex
CLIENT_KEY = f"sk-ant-api03-PLANTED-{PLANTED}"
GATEWAY_KEY = f"gk-PLANTED-{PLANTED}"
UPSTREAM_KEY = f"sk-ant-PLANTED-UPSTREAM-{PLANTED}"
CONTENT = f"PLANTED-CONTENT-{PLANTED}"
CHAIN = {
    "policies": [
        {"policy": "string_replace", "options": {"replacements": [["PLANTED", "[p]"]]}},
    ]
}
FAILING_CHAIN = {"policies": [{"policy": "tests.support.faulty_policies:ExplodeOnRequest"}]}
TRACE = {
    "x-amzn-trace-id": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
}


def received(xray: XRayEndpoint) -> bytes:
    """Every span sent, as X-Ray decodes it (inside the base64: where a planted string shows)."""
    return b"\n".join(xray.payloads())


def traced_env(upstream_url: str, xray: XRayEndpoint, **extra: str) -> dict[str, str]:
    return {
        "UPSTREAM_BASE_URL": upstream_url,
        "UPSTREAM_MAX_RETRIES": "0",
        "FALLBACK_FLAG_TTL_SECONDS": "0",
        "LAMBDA_TASK_ROOT": "/tmp",
        "AWS_XRAY_DAEMON_ADDRESS": xray.address,
        "UVICORN_LOG_LEVEL": "debug",
        **extra,
    }


def exercise(url: str, upstream: FakeUpstream, credentials: dict[str, str]) -> None:
    """Success, stream, upstream error, fallback, malformed body: all carrying the secrets."""

    def post(body: object, raw: bytes | None = None) -> httpx2.Response:
        return httpx2.post(
            f"{url}/v1/messages",
            content=raw if raw is not None else json.dumps(body).encode(),
            headers={**HEADERS, **TRACE, **credentials},
            timeout=30,
        )

    post(request_body(CONTENT))
    post(request_body(CONTENT, stream=True))
    upstream.script(Reply.error(400, "invalid_request_error", "rejected"))
    post(request_body(CONTENT))
    upstream.script(Reply.error(401, "authentication_error", "bad key"))
    post(request_body(CONTENT))
    post(None, raw=f'{{"messages": "{CONTENT}", '.encode())
    post(None, raw=json.dumps([CONTENT]).encode())


def assert_clean(captured: bytes) -> None:
    assert captured, "nothing was captured: the check would prove nothing"
    for secret in (PLANTED, CLIENT_KEY, GATEWAY_KEY, UPSTREAM_KEY, CONTENT):
        assert secret.encode() not in captured, secret


@pytest.mark.parametrize("chain", [CHAIN, FAILING_CHAIN], ids=["fallback", "policy-failure"])
def test_passthrough_logs_and_traces_hold_no_secrets(
    upstream_url: str,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    xray: XRayEndpoint,
    tmp_path: Path,
    chain: dict[str, object],
) -> None:
    set_flag("true")
    log = tmp_path / "gateway.log"
    env = traced_env(upstream_url, xray, POLICY_CONFIG=json.dumps(chain))
    with gateway_process(env, stdout_path=log) as (url, _):
        exercise(url, upstream, {"x-api-key": CLIENT_KEY, "authorization": f"Bearer {CLIENT_KEY}"})
    captured = log.read_bytes()
    traces = received(xray)
    assert_clean(captured + traces)
    if chain is CHAIN:
        assert b"passthrough fallback" in captured
        assert b"passthrough_fallback" in traces
        assert any(r.headers.get("x-api-key") == CLIENT_KEY for r in upstream.requests)
    else:
        assert b"policy failed" in captured


def test_gateway_key_logs_and_traces_hold_no_secrets(
    upstream_url: str, upstream: FakeUpstream, xray: XRayEndpoint, tmp_path: Path
) -> None:
    secrets = boto3.client("secretsmanager")
    secrets.create_secret(Name="hygiene/keys", SecretString=json.dumps({"keys": [GATEWAY_KEY]}))
    secrets.create_secret(Name="hygiene/upstream", SecretString=UPSTREAM_KEY)
    log = tmp_path / "gateway.log"
    env = traced_env(
        upstream_url,
        xray,
        AUTH_MODE="gateway_key",
        GATEWAY_KEYS_SECRET="hygiene/keys",
        UPSTREAM_API_KEY_SECRET="hygiene/upstream",
        POLICY_CONFIG=json.dumps(CHAIN),
    )
    with gateway_process(env, stdout_path=log) as (url, _):
        exercise(url, upstream, {"x-api-key": GATEWAY_KEY})
        exercise(url, upstream, {"authorization": f"Bearer {GATEWAY_KEY}-wrong"})
        wrong = httpx2.post(
            f"{url}/v1/messages",
            json=request_body(),
            headers={**HEADERS, "x-api-key": UPSTREAM_KEY},
        )
        assert wrong.status_code == 401
    assert_clean(log.read_bytes() + received(xray))
    assert upstream.requests
    assert all(r.headers["x-api-key"] == UPSTREAM_KEY for r in upstream.requests)
    assert b"gateway key rejected" in log.read_bytes()


def test_hop_by_hop_and_platform_headers_are_dropped_and_host_rewritten(
    make_gateway: GatewayFactory, upstream: FakeUpstream, upstream_url: str
) -> None:
    url = make_gateway()
    sent = {
        **HEADERS,
        "connection": "keep-alive, x-hop-custom",
        "x-hop-custom": "for this hop only",
        "keep-alive": "timeout=5",
        "te": "trailers",
        "proxy-authorization": "Basic cHJveHk6c2VjcmV0",
        "x-forwarded-for": "203.0.113.9",
        "x-amzn-lambda-context": json.dumps({"request_id": "r-1"}),
        "x-amzn-request-context": "{}",
        "anthropic-beta": "future-feature-2031-01-01",
        "x-custom": "kept",
    }
    assert httpx2.post(f"{url}/v1/messages", json=request_body(), headers=sent).status_code == 200
    received_headers = upstream.requests[0].headers
    for dropped in (
        "x-hop-custom",
        "keep-alive",
        "te",
        "proxy-authorization",
        "x-forwarded-for",
        "x-amzn-lambda-context",
        "x-amzn-request-context",
    ):
        assert dropped not in received_headers, dropped
    assert received_headers["host"] == urlsplit(upstream_url).netloc
    assert received_headers["anthropic-beta"] == "future-feature-2031-01-01"
    assert received_headers["x-custom"] == "kept"
    assert received_headers["x-api-key"] == HEADERS["x-api-key"]
