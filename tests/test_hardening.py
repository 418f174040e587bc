"""What an adversarial review broke (issue 9), each kept fixed by a test that failed before.

A hostile client and a misbehaving upstream, black box, over real loopback servers.
"""

from __future__ import annotations

import gzip
import json
import time
from typing import Any
from urllib.parse import unquote, unquote_plus

import httpx2
import pytest
from policy_gateway import settings
from policy_gateway.auth import Credentials
from policy_gateway.relay import _retry_delay

from .conftest import GatewayFactory, GatewayStdout
from .support.client import HEADERS, error_of, request_body
from .support.fake_upstream import FakeUpstream, Reply, message


def post(url: str, body: Any, *, path: str = "/v1/messages", **headers: str) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(url + path, content=content, headers={**HEADERS, **headers}, timeout=30)


def assert_error(response: httpx2.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    error = error_of(response.content)
    assert error["type"] == kind
    return str(error["message"])


# --- 8. the smaller ones ------------------------------------------------------------------


def test_a_trailing_slash_is_a_plain_404_without_a_redirect(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    response = post(url, request_body(), path="/v1/messages/", host="evil.example")
    assert_error(response, 404, "not_found_error")
    assert "location" not in response.headers
    assert upstream.requests == []


KEY = "sk-ant-a+b/c=d"


@pytest.mark.parametrize(
    "query",
    [
        "key=sk-ant-a%2Bb%2Fc%3Dd",  # percent-encoded
        "key=sk-ant-a%2bb%2fc%3dd",  # lower-case escapes
        "key=sk-ant-a+b/c=d",  # raw
        "sk-ant-a%2Bb%2Fc%3Dd",  # the key as a parameter name
        "key=sk-ant-a%252Bb",  # harmless: one decoding gives no key
    ],
)
def test_a_credential_in_the_query_string_never_reaches_upstream_in_any_encoding(
    make_gateway: GatewayFactory, upstream: FakeUpstream, query: str
) -> None:
    url = make_gateway()
    response = post(
        url, request_body(), path="/v1/messages?beta=true&" + query, **{"x-api-key": KEY}
    )
    assert response.status_code == 200
    sent = upstream.requests[0].query
    assert sent.startswith("beta=true&")
    for reading in (sent, unquote(sent), unquote_plus(sent)):
        assert KEY not in reading


def test_query_scrubbing_keeps_parameters_without_credentials_byte_for_byte() -> None:
    credentials = Credentials([], (b"gk+1/2=",))
    assert credentials.scrub_query(b"beta=true&x=%41") == b"beta=true&x=%41"
    assert credentials.scrub_query(b"beta=true&key=gk%2B1%2F2%3D") == b"beta=true&key=[redacted]"


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", False), ("gzip", True), ("br", False), ("deflate, gzip", False)],
)
def test_an_encoded_request_body_is_refused(
    make_gateway: GatewayFactory, upstream: FakeUpstream, encoding: str, compress: bool
) -> None:
    url = make_gateway(policy_config=json.dumps({"policies": [{"policy": "noop"}]}))
    body = json.dumps(request_body()).encode()
    response = post(
        url, gzip.compress(body) if compress else body, **{"content-encoding": encoding}
    )
    assert "Content-Encoding" in assert_error(response, 415, "invalid_request_error")
    assert upstream.requests == []


def test_identity_encoding_passes_and_no_encoding_header_goes_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    response = post(url, request_body(), **{"content-encoding": "identity"})
    assert response.status_code == 200
    assert "content-encoding" not in upstream.requests[0].headers


@pytest.mark.parametrize(
    "headers",
    [{"retry-after": "120"}, {"retry-after-ms": "90000"}, {"retry-after": "-5"}],
)
def test_a_retry_after_outside_the_sdks_range_uses_the_normal_backoff(
    headers: dict[str, str],
) -> None:
    assert _retry_delay(0, httpx2.Headers(headers)) <= 0.5
    assert _retry_delay(0, httpx2.Headers({"retry-after": "2"})) == 2.0


def test_an_upstream_asking_for_minutes_does_not_park_the_call(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_max_retries=1)
    overloaded = Reply.error(529, "overloaded_error")
    overloaded.headers["retry-after"] = "120"
    upstream.script(overloaded, Reply(body=message("echo: later")))
    started = time.monotonic()
    response = httpx2.post(url + "/v1/messages", json=request_body(), headers=HEADERS, timeout=10)
    assert response.status_code == 200
    assert time.monotonic() - started < 3


SPOOFED = {
    "x-amzn-lambda-context": json.dumps({"request_id": "spoofed-id", "deadline": 1000}),
    "x-amzn-request-context": json.dumps({"requestId": "spoofed-url-id"}),
}


def test_lambda_context_headers_are_ignored_outside_lambda(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway()
    response = post(url, request_body(), **SPOOFED)
    # A deadline in 1970 would have made this a 504 had the header been believed.
    assert response.status_code == 200
    gateway_stdout.until(lambda text: "call finished" in text)
    [finished] = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    assert finished["call_id"] != "spoofed-id"
    assert finished["correlation_id"] != "spoofed-url-id"


def test_lambda_context_headers_are_trusted_in_lambda(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    assert settings.Settings.from_env({"LAMBDA_TASK_ROOT": "/var/task"}).trust_lambda_context
    assert not settings.Settings.from_env({}).trust_lambda_context
    url = make_gateway(trust_lambda_context=True)
    context = {"x-amzn-lambda-context": json.dumps({"request_id": "lambda-id"})}
    assert post(url, request_body(), **context).status_code == 200
    gateway_stdout.until(lambda text: "call finished" in text)
    [finished] = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    assert finished["call_id"] == "lambda-id"
