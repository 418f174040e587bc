"""Which headers cross the gateway (policy_gateway.headers), alone."""

from __future__ import annotations

import pytest
from policy_gateway.errors import GatewayError
from policy_gateway.headers import downstream_headers, forwarded_headers, upstream_headers

pytestmark = pytest.mark.unit


def raw(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in pairs]


def test_upstream_keeps_api_headers_and_lowercases_names() -> None:
    out = upstream_headers(
        raw(
            ("X-Api-Key", "sk-ant-k"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "a,b"),
            ("anthropic-future-header", "kept"),
            ("user-agent", "sdk"),
        )
    )
    assert out == [
        ("x-api-key", "sk-ant-k"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "a,b"),
        ("anthropic-future-header", "kept"),
        ("user-agent", "sdk"),
        ("content-type", "application/json"),
    ]


def test_upstream_drops_hop_by_hop_framing_host_and_platform_headers() -> None:
    dropped = [
        ("connection", "keep-alive, x-private"),
        ("x-private", "named by Connection"),
        ("keep-alive", "timeout=5"),
        ("transfer-encoding", "chunked"),
        ("te", "trailers"),
        ("upgrade", "h2c"),
        ("proxy-authorization", "Basic x"),
        ("host", "gateway.example"),
        ("content-length", "12"),
        ("accept-encoding", "gzip"),
        ("expect", "100-continue"),
        ("x-amzn-lambda-context", "{}"),
        ("x-amzn-trace-id", "Root=1"),
        ("x-forwarded-for", "10.0.0.1"),
        ("x-amz-date", "20260101T000000Z"),
    ]
    assert upstream_headers(raw(*dropped)) == [("content-type", "application/json")]


def test_upstream_content_type_is_always_json() -> None:
    out = upstream_headers(raw(("Content-Type", "text/plain; charset=latin-1")))
    assert out == [("content-type", "application/json")]


def test_a_header_value_the_upstream_client_cannot_send_is_a_400() -> None:
    # httpx2 sends header values as ASCII; refusing here means no policy runs
    # and nothing is sent for a call that could never reach the upstream.
    with pytest.raises(GatewayError) as refused:
        upstream_headers([(b"x-note", b"caf\xe9")])
    assert refused.value.status == 400
    assert refused.value.message == "A request header value is not ASCII."


def test_downstream_keeps_the_apis_headers() -> None:
    kept = [
        ("request-id", "req_1"),
        ("retry-after", "3"),
        ("anthropic-ratelimit-requests-remaining", "9"),
        ("content-type", "text/event-stream"),
    ]
    assert downstream_headers(kept) == [(k.encode(), v.encode()) for k, v in kept]


def test_downstream_drops_framing_hop_by_hop_and_server_identity() -> None:
    out = downstream_headers(
        [
            ("Content-Length", "10"),
            ("content-encoding", "gzip"),
            ("date", "Tue, 01 Dec 2026 00:00:00 GMT"),
            ("server", "cloudflare"),
            ("connection", "close, x-hop"),
            ("x-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("request-id", "req_1"),
        ]
    )
    assert out == [(b"request-id", b"req_1")]


CLIENT_CREDENTIALS = [(b"x-api-key", b"sk-client"), (b"authorization", b"Bearer sk-client")]


def test_the_clients_credentials_go_upstream_when_the_gateway_holds_none() -> None:
    out = forwarded_headers([*CLIENT_CREDENTIALS, (b"anthropic-version", b"2023-06-01")], None)
    assert ("x-api-key", "sk-client") in out
    assert ("authorization", "Bearer sk-client") in out
    assert ("anthropic-version", "2023-06-01") in out


def test_the_gateways_credential_replaces_both_of_the_clients() -> None:
    out = forwarded_headers(CLIENT_CREDENTIALS, [("x-api-key", "sk-gateway")])
    assert [item for item in out if item[0] in ("x-api-key", "authorization")] == [
        ("x-api-key", "sk-gateway")
    ]


def test_an_upstream_that_signs_with_iam_gets_no_key_at_all() -> None:
    out = forwarded_headers(CLIENT_CREDENTIALS, [])
    assert not [item for item in out if item[0] in ("x-api-key", "authorization")]
