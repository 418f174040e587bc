"""Faults upstream, in AWS, in policies and at the client: each has one defined outcome."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx2
import pytest
from moto.server import ThreadedMotoServer

from .support.client import HEADERS, error_of, policy_chain, request_body, sse_frames
from .support.clock import eventually
from .support.fake_upstream import FakeUpstream, Reply, text_events
from .support.faulty_policies import INTERNALS
from .support.gateway import GatewayFactory
from .support.servers import free_port, gateway_process

FAST_RETRY = {"retry-after-ms": "20"}


def post(url: str, body: dict[str, Any], **headers: str) -> httpx2.Response:
    return httpx2.post(f"{url}/v1/messages", json=body, headers={**HEADERS, **headers}, timeout=30)


def assert_error(response: httpx2.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    error = error_of(response.content)
    assert error["type"] == kind
    return str(error["message"])


def retrying(reply: Reply) -> Reply:
    reply.headers.update(FAST_RETRY)
    return reply


# --- upstream faults -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_upstream_refusing_connections_is_502_after_retries(
    make_gateway: GatewayFactory, stream: bool
) -> None:
    url = make_gateway(upstream_base_url=f"http://127.0.0.1:{free_port()}", upstream_max_retries=2)
    started = time.monotonic()
    message = assert_error(post(url, request_body(stream=stream)), 502, "api_error")
    assert "could not connect" in message
    # Two backoffs of at least 0.375 s and 0.75 s: the retries happened.
    assert time.monotonic() - started > 1.1


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A port whose accept queue is full, so a new connection never completes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in [*fillers, listener]:
        sock.close()


def test_upstream_connect_stall_is_504(make_gateway: GatewayFactory, unanswered_port: int) -> None:
    url = make_gateway(
        upstream_base_url=f"http://127.0.0.1:{unanswered_port}", upstream_connect_timeout=0.3
    )
    message = assert_error(post(url, request_body()), 504, "timeout_error")
    assert "connecting" in message


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_upstream_read_stall_before_the_answer_is_504(
    make_gateway: GatewayFactory, upstream: FakeUpstream, stream: bool
) -> None:
    url = make_gateway(upstream_read_timeout=0.3)
    upstream.script(Reply(delay=2, events=text_events(["late"]) if stream else None))
    assert_error(post(url, request_body(stream=stream)), 504, "timeout_error")


def test_upstream_stall_mid_stream_ends_with_a_timeout_event(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_read_timeout=0.3)
    upstream.script(Reply(events=text_events(["slow"] * 3), event_delay=1.0))
    response = post(url, request_body(stream=True))
    assert response.status_code == 200
    frames = sse_frames(response.text)
    assert frames[0][0] == "message_start"
    assert frames[-1][0] == "error"
    assert error_of(frames[-1][1])["type"] == "timeout_error"


def test_upstream_reset_before_the_first_event_is_502_and_not_retried(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_max_retries=2)
    upstream.script(Reply(events=text_events(["never"]), break_after=0))
    assert_error(post(url, request_body(stream=True)), 502, "api_error")
    assert len(upstream.requests) == 1


def test_upstream_reset_mid_stream_ends_with_an_error_event(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_max_retries=2)
    upstream.script(Reply(events=text_events(["one", "two"]), break_after=4))
    response = post(url, request_body(stream=True))
    assert response.status_code == 200
    names = [name for name, _ in sse_frames(response.text)]
    assert names == ["message_start", "content_block_start", "ping", "content_block_delta", "error"]
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("retries", [0, 1])
def test_html_error_page_becomes_an_anthropic_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, retries: int
) -> None:
    url = make_gateway(upstream_max_retries=retries)
    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    upstream.script(*[retrying(Reply(status=502, raw=page)) for _ in range(retries + 1)])
    message = assert_error(post(url, request_body()), 502, "api_error")
    assert "<html>" not in message
    assert len(upstream.requests) == retries + 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("status", "kind"), [(500, "api_error"), (529, "overloaded_error")])
def test_server_errors_are_retried_then_returned_as_they_are(
    make_gateway: GatewayFactory, upstream: FakeUpstream, status: int, kind: str, stream: bool
) -> None:
    url = make_gateway(upstream_max_retries=2)
    upstream.script(*[retrying(Reply.error(status, kind, "still failing")) for _ in range(3)])
    response = post(url, request_body(stream=stream))
    assert assert_error(response, status, kind) == "still failing"
    assert response.headers["request-id"] == "req_fake_error"
    assert len(upstream.requests) == 3


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_server_error_then_success_is_invisible_to_the_client(
    make_gateway: GatewayFactory, upstream: FakeUpstream, stream: bool
) -> None:
    url = make_gateway(upstream_max_retries=2)
    upstream.script(retrying(Reply.error(529, "overloaded_error")))
    response = post(url, request_body("retry-me", stream=stream))
    assert response.status_code == 200
    assert "retry-me" in response.text
    assert len(upstream.requests) == 2


def test_retry_after_is_honoured(make_gateway: GatewayFactory, upstream: FakeUpstream) -> None:
    url = make_gateway(upstream_max_retries=1)
    slow = Reply.error(429, "rate_limit_error")
    slow.headers["retry-after-ms"] = "600"
    upstream.script(slow)
    started = time.monotonic()
    assert post(url, request_body()).status_code == 200
    assert time.monotonic() - started >= 0.6


# --- policy faults ---------------------------------------------------------------------


def chain(name: str) -> str:
    return policy_chain((f"tests.support.faulty_policies:{name}", {}))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_policy_raising_on_request_fails_closed(
    make_gateway: GatewayFactory, upstream: FakeUpstream, stream: bool
) -> None:
    url = make_gateway(policy_config=chain("ExplodeOnRequest"))
    response = post(url, request_body("private words", stream=stream))
    message = assert_error(response, 500, "api_error")
    assert "ExplodeOnRequest" in message
    for leaked in (INTERNALS, "private words", "Traceback", "RuntimeError"):
        assert leaked not in response.text
    assert upstream.requests == []


def test_policy_raising_on_response_fails_closed(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=chain("ExplodeOnResponse"))
    response = post(url, request_body("private words"))
    assert_error(response, 500, "api_error")
    assert INTERNALS not in response.text
    assert "echo" not in response.text


def test_policy_raising_mid_stream_ends_with_an_error_event(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=chain("ExplodeMidStream"))
    response = post(url, request_body("private words", stream=True))
    assert response.status_code == 200
    frames = sse_frames(response.text)
    assert [name for name, _ in frames] == [
        "message_start",
        "content_block_start",
        "ping",
        "error",
    ]
    assert error_of(frames[-1][1])["type"] == "api_error"
    assert INTERNALS not in response.text


# --- the client and the Lambda deadline --------------------------------------------------


def test_client_disconnect_stops_reading_upstream_at_once(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(Reply(events=text_events(["word"] * 100), event_delay=0.2))
    seen = 0
    with httpx2.stream(
        "POST", f"{url}/v1/messages", json=request_body(stream=True), headers=HEADERS
    ) as response:
        for line in response.iter_lines():
            seen += line.startswith("event:")
            if seen == 2:
                break
    closed = time.monotonic()
    # Else the gateway kept reading the upstream stream.
    eventually(lambda: upstream.disconnects, interval=0.01)
    assert upstream.disconnects[0] - closed < 1.0


def lambda_context(seconds_left: float) -> dict[str, str]:
    deadline_ms = int((time.time() + seconds_left) * 1000)
    return {
        "x-amzn-lambda-context": json.dumps({"request_id": "lambda-req-1", "deadline": deadline_ms})
    }


def test_stream_ends_with_an_error_event_before_the_lambda_deadline(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(deadline_margin=1.0, trust_lambda_context=True)
    upstream.script(Reply(events=text_events(["word"] * 50), event_delay=0.1))
    headers = lambda_context(2.5)
    deadline = json.loads(headers["x-amzn-lambda-context"])["deadline"] / 1000
    response = post(url, request_body(stream=True), **headers)
    assert time.time() < deadline - 0.5
    frames = sse_frames(response.text)
    assert response.status_code == 200
    assert frames[0][0] == "message_start"
    assert frames[-1][0] == "error"
    assert error_of(frames[-1][1])["type"] == "timeout_error"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_slow_answer_is_504_before_the_lambda_deadline(
    make_gateway: GatewayFactory, upstream: FakeUpstream, stream: bool
) -> None:
    url = make_gateway(deadline_margin=1.0, trust_lambda_context=True)
    upstream.script(Reply(delay=5, events=text_events(["late"]) if stream else None))
    headers = lambda_context(2.0)
    deadline = json.loads(headers["x-amzn-lambda-context"])["deadline"] / 1000
    response = post(url, request_body(stream=stream), **headers)
    assert time.time() < deadline - 0.5
    assert "Lambda deadline" in assert_error(response, 504, "timeout_error")


# --- AWS faults --------------------------------------------------------------------------

POLICY_PARAMETER = "/test/policy-config"
FLAG_PARAMETER = "/test/fallback-flag"


def _seed_aws(endpoint: str, keys: list[str], replace_with: str) -> None:
    """Write the parameters and secrets (moto keeps one state per process, across servers)."""
    ssm: Any = boto3.client("ssm", endpoint_url=endpoint)
    secrets: Any = boto3.client("secretsmanager", endpoint_url=endpoint)
    policy = {
        "policies": [
            {"policy": "string_replace", "options": {"replacements": [["alpha", replace_with]]}}
        ]
    }
    ssm.put_parameter(
        Name=POLICY_PARAMETER, Value=json.dumps(policy), Type="String", Overwrite=True
    )
    ssm.put_parameter(Name=FLAG_PARAMETER, Value="true", Type="String", Overwrite=True)
    for name, value in (("keys", json.dumps({"keys": keys})), ("anthropic", "sk-ant-held")):
        try:
            secrets.create_secret(Name=name, SecretString=value)
        except secrets.exceptions.ResourceExistsException:
            secrets.put_secret_value(SecretId=name, SecretString=value)


def test_aws_outage_keeps_the_last_good_values_and_recovery_is_seen(
    upstream_url: str, upstream: FakeUpstream, tmp_path: Path
) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    aws = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    aws.start()
    _seed_aws(endpoint, ["gk-before-0123456789abcdef"], "[v1]")
    env = {
        "UPSTREAM_BASE_URL": upstream_url,
        "UPSTREAM_MAX_RETRIES": "0",
        "AUTH_MODE": "gateway_key",
        "GATEWAY_KEYS_SECRET": "keys",
        "UPSTREAM_API_KEY_SECRET": "anthropic",
        "SECRETS_TTL_SECONDS": "0.3",
        "POLICY_CONFIG_PARAMETER": POLICY_PARAMETER,
        "POLICY_CONFIG_TTL_SECONDS": "0.3",
        "FALLBACK_FLAG_PARAMETER": FLAG_PARAMETER,
        "FALLBACK_FLAG_TTL_SECONDS": "0.3",
        "AWS_ENDPOINT_URL_SSM": endpoint,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": endpoint,
    }

    def call(key: str) -> httpx2.Response:
        return post(url, request_body("alpha"), **{"x-api-key": key})

    try:
        log = tmp_path / "gateway.log"
        with gateway_process(env, stdout_path=log) as (url, _):
            assert call("gk-before-0123456789abcdef").status_code == 200
            aws.stop()
            # Wait until a refresh has failed (past the TTL), then check what serves.
            eventually(
                lambda: (
                    call("gk-before-0123456789abcdef").status_code == 200
                    and "keeping the last good" in log.read_text()
                )
            )
            # Keys, the upstream key and the policy chain: the last good values serve.
            upstream.reset()
            assert call("gk-before-0123456789abcdef").status_code == 200
            assert upstream.requests[0].json["messages"][0]["content"] == "[v1]"
            assert upstream.requests[0].headers["x-api-key"] == "sk-ant-held"
            assert call("gk-wrong").status_code == 401
            # The flag fails closed: off while SSM is unreadable, so no fallback.
            upstream.script(Reply.error(400, "invalid_request_error"))
            assert call("gk-before-0123456789abcdef").status_code == 400
            # Recovery (with rotated values) is seen within a TTL: nothing was cached forever.
            aws = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            aws.start()
            _seed_aws(endpoint, ["gk-after-0123456789abcdef"], "[v2]")
            eventually(
                lambda: (
                    call("gk-after-0123456789abcdef").status_code == 200
                    and upstream.requests[-1].json["messages"][0]["content"] == "[v2]"
                )
            )
            upstream.reset()
            assert call("gk-before-0123456789abcdef").status_code == 401
            assert call("gk-after-0123456789abcdef").status_code == 200
            assert upstream.requests[0].json["messages"][0]["content"] == "[v2]"
        assert "keeping the last good" in log.read_text()
    finally:
        aws.stop()
