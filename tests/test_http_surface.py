"""The gateway's HTTP surface: routes, faithful forwarding, headers, errors, streaming."""

from __future__ import annotations

import json
import time

import anthropic
import httpx2
import pytest

from .support.fake_upstream import MODEL, FakeUpstream, Reply, text_events
from .support.gateway import GatewayFactory
from .support.sdk import REPLACE, sdk
from .support.servers import wait_ready


def assert_anthropic_error(response: httpx2.Response, status: int, error_type: str) -> None:
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2, 3]", "must be a JSON object"),
        (b'"a string"', "must be a JSON object"),
        (b"", "not valid JSON"),
    ],
)
def test_bad_bodies_get_400_and_no_upstream_call(
    make_gateway: GatewayFactory, upstream: FakeUpstream, body: bytes, message: str
) -> None:
    url = make_gateway()
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = httpx2.post(
            url + path, content=body, headers={"content-type": "application/json"}
        )
        assert_anthropic_error(response, 400, "invalid_request_error")
        assert message in response.json()["error"]["message"]
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("method", "path", "status", "error_type"),
    [
        ("GET", "/v1/skills", 404, "not_found_error"),
        ("PUT", "/v1/messages/batches", 405, "invalid_request_error"),
        ("POST", "/v1/complete", 404, "not_found_error"),
        ("POST", "/", 404, "not_found_error"),
        ("GET", "/v1/messages", 405, "invalid_request_error"),
        ("DELETE", "/v1/messages/count_tokens", 405, "invalid_request_error"),
        ("POST", "/healthz", 405, "invalid_request_error"),
    ],
)
def test_other_routes_and_methods_get_anthropic_errors(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    method: str,
    path: str,
    status: int,
    error_type: str,
) -> None:
    url = make_gateway()
    response = httpx2.request(method, url + path, json={"model": MODEL})
    assert_anthropic_error(response, status, error_type)
    assert upstream.requests == []


def test_healthz(make_gateway: GatewayFactory) -> None:
    url = make_gateway()
    wait_ready(url)
    response = httpx2.get(url + "/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_body_and_unknown_fields_reach_upstream_untouched(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    body = (
        b'{"model": "claude-sonnet-4-6", "max_tokens": 5,'
        b' "future_field": {"x": [1, 2.50, "\\u00e9"]},'
        b' "messages": [{"role": "user", "content": [{"type": "new_block", "data": 1}]}]}'
    )
    response = httpx2.post(url + "/v1/messages", content=body)
    assert response.status_code == 200
    assert upstream.requests[0].body == body


def test_headers_cross_in_both_directions(
    make_gateway: GatewayFactory, upstream: FakeUpstream, upstream_url: str
) -> None:
    url = make_gateway()
    upstream.script(
        Reply(
            body={"id": "msg_1", "type": "message", "content": []},
            headers={
                "request-id": "req_123",
                "anthropic-ratelimit-requests-remaining": "42",
                "retry-after": "3",
            },
        )
    )
    response = httpx2.post(
        url + "/v1/messages",
        json={"model": MODEL, "max_tokens": 5, "messages": []},
        headers={
            "x-api-key": "sk-ant-client",
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "tools-2024-05-16,prompt-caching-2024-07-31",
            "connection": "keep-alive, x-custom-hop",
            "x-amzn-lambda-context": json.dumps({"request_id": "abc"}),
        },
    )
    assert response.headers["request-id"] == "req_123"
    assert response.headers["anthropic-ratelimit-requests-remaining"] == "42"
    assert response.headers["retry-after"] == "3"
    sent = upstream.requests[0].headers
    assert sent["x-api-key"] == "sk-ant-client"
    assert sent["anthropic-version"] == "2023-06-01"
    assert sent["anthropic-beta"] == "tools-2024-05-16,prompt-caching-2024-07-31"
    assert sent["host"] == upstream_url.removeprefix("http://")
    assert "x-amzn-lambda-context" not in sent
    assert sent.get("connection", "keep-alive") == "keep-alive"


def test_authorization_bearer_passes_through(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    client = anthropic.Anthropic(
        base_url=make_gateway(), auth_token="oauth-token-123", max_retries=0
    )
    client.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert upstream.requests[0].headers["authorization"] == "Bearer oauth-token-123"


def test_count_tokens_applies_request_policies(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    client = sdk(make_gateway(policy_config=REPLACE))
    count = client.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "about secret-project"}]
    )
    assert count.input_tokens > 0
    assert upstream.requests[0].path == "/v1/messages/count_tokens"
    assert upstream.requests[0].json["messages"][0]["content"] == "about [codename]"


def test_stream_events_are_relayed_as_they_arrive(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(Reply(events=text_events(["a", "b", "c", "d"]), event_delay=0.25))
    started = time.monotonic()
    arrivals: list[float] = []
    with sdk(url).messages.stream(
        model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        for _ in stream.text_stream:
            arrivals.append(time.monotonic() - started)
        final = stream.get_final_message()
    assert [block.text for block in final.content if block.type == "text"] == ["abcd"]
    assert len(arrivals) == 4
    assert arrivals[0] < 1.0
    assert arrivals[-1] - arrivals[0] > 0.5


def test_sse_frames_keep_their_event_lines(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(
        Reply(
            events=[
                *text_events(["x"])[:3],
                ("brand_new_event", {"type": "brand_new_event"}),
                *text_events(["x"])[3:],
            ]
        )
    )
    with httpx2.stream(
        "POST", url + "/v1/messages", json={"model": MODEL, "stream": True, "messages": []}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    frames = text.strip().split("\n\n")
    assert [f.split("\n")[0] for f in frames] == [
        "event: message_start",
        "event: content_block_start",
        "event: ping",
        "event: brand_new_event",
        "event: content_block_delta",
        "event: content_block_stop",
        "event: message_delta",
        "event: message_stop",
    ]
    assert all(f.split("\n")[1].startswith("data: {") for f in frames)
