"""What an adversarial review broke (issue 9), each kept fixed by a test that failed before.

A hostile client and a misbehaving upstream, black box, over real loopback servers.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus

import httpx2
import psutil
import pytest
from gateway_policies import PolicyViolation
from gateway_policies.builtin.cap_max_tokens import CapMaxTokens
from gateway_policies.testing import run_request
from policy_gateway import settings
from policy_gateway.auth.authenticator import Credentials
from policy_gateway.upstream.retry import retry_delay

from .support.client import HEADERS, error_of, request_body
from .support.fake_upstream import FakeUpstream, Reply, message
from .support.gateway import GatewayFactory, GatewayStdout
from .support.servers import gateway_process


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


KEY = "sk-ant-key-a+b/c=d"


@pytest.mark.parametrize(
    "query",
    [
        "key=sk-ant-key-a%2Bb%2Fc%3Dd",  # percent-encoded
        "key=sk-ant-key-a%2bb%2fc%3dd",  # lower-case escapes
        "key=sk-ant-key-a+b/c=d",  # raw
        "sk-ant-key-a%2Bb%2Fc%3Dd",  # the key as a parameter name
        "key=sk-ant-key-a%252Bb",  # harmless: one decoding gives no key
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
    assert retry_delay(0, httpx2.Headers(headers)) <= 0.5
    assert retry_delay(0, httpx2.Headers({"retry-after": "2"})) == 2.0


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


def test_a_retry_after_the_deadline_would_pass_is_never_slept(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    """A `retry-after` the SDK would honour, but longer than the Lambda has left: no retry."""
    url = make_gateway(upstream_max_retries=2, deadline_margin=1.0, trust_lambda_context=True)
    overloaded = Reply.error(529, "overloaded_error")
    overloaded.headers["retry-after"] = "30"
    upstream.script(overloaded, Reply(body=message("echo: too late")))
    deadline_ms = int((time.time() + 4.0) * 1000)
    started = time.monotonic()
    response = post(
        url,
        request_body(),
        **{"x-amzn-lambda-context": json.dumps({"request_id": "r", "deadline": deadline_ms})},
    )
    # Slept on, the call would end as the deadline's 504 three seconds from now.
    assert_error(response, 529, "overloaded_error")
    assert time.monotonic() - started < 1.5
    assert len(upstream.requests) == 1


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


# --- 2. the fallback's record -------------------------------------------------------------

CLIENT_KEY = "sk-ant-client-key-in-clear-0123456789"
REPLACE_CHAIN = json.dumps(
    {"policies": [{"policy": "string_replace", "options": {"replacements": [["alpha", "[a]"]]}}]}
)


def test_the_fallback_record_holds_no_credential_and_no_upstream_message(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    set_flag: Callable[[str], None],
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE_CHAIN)
    echoed = Reply.error(
        404, "not_found_error", f"model: claude-codename-zeta (key {CLIENT_KEY}) not found"
    )
    echoed.headers["request-id"] = f"req_{CLIENT_KEY}"
    upstream.script(echoed, Reply(body=message("echo: served")))
    body = request_body("alpha")
    response = post(url, body, **{"x-api-key": CLIENT_KEY})
    assert response.status_code == 200
    text = gateway_stdout.until(lambda out: "call finished" in out)
    assert CLIENT_KEY not in text
    assert "claude-codename-zeta" not in text
    [warning] = [line for line in gateway_stdout.lines() if line.get("level") == "WARNING"]
    assert warning["upstream_error_type"] == "not_found_error"
    assert warning["upstream_request_id"] == "req_[redacted]"
    assert warning["changed_by_policy"] == {"string_replace": ["$.messages[0].content"]}


# --- 3. the upstream reads what the policies read -----------------------------------------

BLOCK_CHAIN = json.dumps(
    {"policies": [{"policy": "block_tool_calls", "options": {"rules": [{"tool": "^bash$"}]}}]}
)


@pytest.mark.parametrize("value", ["true", 1, "false", 0, None, [True]])
def test_stream_that_is_not_a_json_boolean_is_refused(
    make_gateway: GatewayFactory, upstream: FakeUpstream, value: Any
) -> None:
    url = make_gateway(policy_config=BLOCK_CHAIN)
    response = post(url, {**request_body(), "stream": value})
    assert "stream" in assert_error(response, 400, "invalid_request_error")
    assert upstream.requests == []


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "stream": true, "max_tokens": 5, "messages": [], "stream": false}',
        b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "role": "assistant"}]}',
        # Written as the SDKs write (no spaces): the shape orjson reads (routes/body.py).
        b'{"model":"m","stream":true,"max_tokens":5,"messages":[],"stream":false}',
        b'{"model":"m","max_tokens":5,"messages":[{"role":"user","role":"assistant"}]}',
    ],
    ids=["top-level", "nested", "top-level-compact", "nested-compact"],
)
@pytest.mark.parametrize("chain", [None, REPLACE_CHAIN], ids=["no-policies", "rewriting"])
def test_duplicate_keys_are_refused(
    make_gateway: GatewayFactory, upstream: FakeUpstream, raw: bytes, chain: str | None
) -> None:
    url = make_gateway(policy_config=chain)
    response = post(url, raw)
    assert "duplicate key" in assert_error(response, 400, "invalid_request_error")
    assert upstream.requests == []


@pytest.mark.parametrize("chain", [None, REPLACE_CHAIN], ids=["no-policies", "rewriting"])
def test_an_integer_beyond_64_bits_reaches_the_upstream_exact(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chain: str | None
) -> None:
    url = make_gateway(policy_config=chain)
    huge = 2**70 + 1
    request = {**request_body(), "metadata": {"user_id": "u"}, "top_k": huge}
    raw = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
    assert post(url, raw).status_code == 200
    sent = upstream.requests[0].json
    assert type(sent["top_k"]) is int
    assert sent["top_k"] == huge


TOOL_CALL = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}
SSE_WITH_TOOL_CALL = (
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":'
    + json.dumps(TOOL_CALL).encode()
    + b"}\n\n"
)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(raw=SSE_WITH_TOOL_CALL, content_type="text/event-stream"),
        Reply(body=[message("a list, not an object")]),
        Reply(raw=b"not json at all", content_type="application/json"),
    ],
    ids=["event-stream", "json-list", "not-json"],
)
def test_a_json_answer_the_response_policies_cannot_read_fails_closed(
    make_gateway: GatewayFactory, upstream: FakeUpstream, reply: Reply
) -> None:
    url = make_gateway(policy_config=BLOCK_CHAIN)
    upstream.script(reply)
    assert_error(post(url, request_body()), 502, "api_error")


def test_a_json_answer_where_a_stream_was_asked_fails_closed_with_stream_policies(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=BLOCK_CHAIN)
    smuggled = {"type": "x", "note": "event: content_block_start\ndata: {}\n\n"}
    upstream.script(
        Reply(raw=(json.dumps(smuggled) + "\n\n").encode(), content_type="application/json")
    )
    assert_error(post(url, request_body(stream=True)), 502, "api_error")


def test_without_response_policies_an_odd_answer_passes_as_it_came(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    rewrite = {"policy": "rewrite_model", "options": {"map": {"a": "b"}}}
    url = make_gateway(policy_config=json.dumps({"policies": [rewrite]}))
    upstream.script(Reply(body=["odd"]))
    response = post(url, request_body())
    assert response.status_code == 200
    assert response.json() == ["odd"]


# --- 4. numbers in every JSON form --------------------------------------------------------


@pytest.mark.parametrize("value", [64000, 64000.0, "64000", " 64000 ", "6.4e4", 4096.5])
def test_cap_max_tokens_caps_every_form_of_a_number(value: Any) -> None:
    request = {**request_body(), "max_tokens": value, "thinking": {"budget_tokens": "9000"}}
    out = run_request(CapMaxTokens({"max": 4096}), request)
    assert out["max_tokens"] == 4096
    assert type(out["max_tokens"]) is int
    assert out["thinking"]["budget_tokens"] == 4095


@pytest.mark.parametrize("value", ["lots", True, None, [], {}, "inf", "NaN", "Infinity"])
def test_cap_max_tokens_refuses_what_is_no_number(value: Any) -> None:
    with pytest.raises(PolicyViolation) as caught:
        run_request(CapMaxTokens({"max": 4096}), {**request_body(), "max_tokens": value})
    assert caught.value.status == 400
    assert caught.value.error_type == "invalid_request_error"


def test_a_float_max_tokens_is_capped_through_the_gateway(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(
        policy_config=json.dumps(
            {"policies": [{"policy": "cap_max_tokens", "options": {"max": 50}}]}
        )
    )
    raw = json.dumps({**request_body(), "max_tokens": 0}).replace(
        '"max_tokens": 0', '"max_tokens": 64000.0'
    )
    assert post(url, raw.encode()).status_code == 200
    assert upstream.requests[0].json["max_tokens"] == 50
    assert post(url, {**request_body(), "max_tokens": "x"}).status_code == 400
    assert len(upstream.requests) == 1


# --- 5. no input is a 500 -----------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [500, 800, 950])
def test_deeply_nested_json_never_breaks_the_fallback(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    set_flag: Callable[[str], None],
    depth: int,
) -> None:
    set_flag("true")
    url = make_gateway(policy_config=REPLACE_CHAIN)
    upstream.script(Reply.error(400, "invalid_request_error"), Reply(body=message("echo: ok")))
    raw = json.dumps({**request_body("alpha"), "metadata": {"deep": nested(depth)}})
    response = post(url, raw.encode())
    assert response.status_code in (200, 400), response.text
    text = gateway_stdout.until(lambda out: "call finished" in out)
    assert "Traceback" not in text
    [finished] = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    assert finished["status"] == response.status_code
    if response.status_code == 200:
        assert finished["fallback"] == "succeeded"
        [warning] = [line for line in gateway_stdout.lines() if line.get("level") == "WARNING"]
        assert warning["changed_paths"] == ["$.messages[0].content"]


def test_a_policy_walking_a_too_deep_body_is_a_400_not_a_500(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=json.dumps({"policies": [{"policy": "redact_secrets"}]}))
    block: Any = {"type": "text", "text": "sk-ant-0123456789abcdef"}
    for _ in range(300):
        block = {"type": "tool_result", "tool_use_id": "t", "content": [block]}
    raw = json.dumps({**request_body(), "messages": [{"role": "user", "content": [block]}]})
    response = post(url, raw.encode())
    assert response.status_code in (200, 400), response.text
    if response.status_code == 200:
        assert "sk-ant-0123456789abcdef" not in upstream.requests[0].body.decode()


# --- 6. memory on the fallback path -------------------------------------------------------

# One parse of a 5 MB body of empty objects is ~110 MB of dicts; the request sent
# and the original parsed once on the error path make two. Before the fix the
# error path parsed and deep-copied it four times and more (~700 MB).
FALLBACK_PEAK_GROWTH_MB = 400


def _peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def test_the_fallback_path_holds_at_most_two_documents_of_a_large_body(
    upstream: FakeUpstream, upstream_url: str, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    env = {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_FLAG_TTL: "0",
        settings.ENV_POLICY_CONFIG: json.dumps(
            {"policies": [{"policy": "inject_system_prompt", "options": {"text": "Be kind."}}]}
        ),
    }
    padding = b"[" + b"{}," * (5 * 1024 * 1024 // 3) + b"{}]"
    body = json.dumps(request_body()).encode()[:-1] + b', "padding": ' + padding + b"}"
    with gateway_process(env) as (url, process):
        assert post(url, request_body()).status_code == 200
        gateway = psutil.Process(process.pid)
        settled = gateway.memory_info().rss / 2**20
        Path(f"/proc/{process.pid}/clear_refs").write_text("5")  # reset the peak
        upstream.script(Reply.error(400, "invalid_request_error"), Reply(body=message("ok")))
        response = post(url, body)
        assert response.status_code == 200, response.text
        assert len(upstream.requests) == 3
        assert upstream.requests[2].body == body  # the fallback resent the original
        growth = _peak_rss_mb(process.pid) - settled
    assert growth < FALLBACK_PEAK_GROWTH_MB, f"peak grew {growth:.0f} MB"
