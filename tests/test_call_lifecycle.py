"""A call's edges: client gone, stream policies refusing, empty streams, odd bytes, queries."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

from .support.client import policy_chain, request_body
from .support.clock import eventually
from .support.fake_upstream import FakeUpstream, Reply, message, text_events
from .support.gateway import GatewayFactory
from .support.policies import BUSY_RELEASED, BUSY_STARTED


def chain(policy: str, **options: object) -> str:
    return policy_chain((policy, options))


def test_client_giving_up_on_a_json_call_stops_the_upstream_wait(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(Reply(body=message("late"), delay=5.0))
    with pytest.raises(httpx2.ReadTimeout):
        httpx2.post(f"{url}/v1/messages", json=request_body(), timeout=0.5)
    gave_up = time.monotonic()
    # Else the gateway kept waiting for an answer nobody reads.
    eventually(lambda: upstream.disconnects, timeout=3, interval=0.01)
    assert upstream.disconnects[0] - gave_up < 1.0


def test_stream_policy_refusing_before_anything_was_sent_keeps_its_status(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(
        policy_config=chain("tests.support.policies:BlockStreamAt", event="message_start")
    )
    response = httpx2.post(f"{url}/v1/messages", json=request_body(stream=True))
    assert response.status_code == 403
    assert response.json()["error"] == {
        "type": "permission_error",
        "message": "blocked at message_start",
    }
    assert len(upstream.requests) == 1


def test_stream_policy_refusing_mid_stream_sends_what_passed_then_its_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(
        policy_config=chain("tests.support.policies:BlockStreamAt", event="content_block_delta")
    )
    upstream.script(Reply(events=text_events(["a", "b"])))
    response = httpx2.post(f"{url}/v1/messages", json=request_body(stream=True))
    assert response.status_code == 200
    frames = [f.split("\n") for f in response.text.strip().split("\n\n")]
    assert [f[0] for f in frames] == [
        "event: message_start",
        "event: content_block_start",
        "event: ping",
        "event: error",
    ]
    error = json.loads(frames[-1][1].removeprefix("data: "))
    assert error["error"] == {
        "type": "permission_error",
        "message": "blocked at content_block_delta",
    }


def test_stream_without_any_event_is_a_502_not_an_empty_200(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(Reply(events=[]))
    response = httpx2.post(f"{url}/v1/messages", json=request_body(stream=True))
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "api_error"


def test_a_policy_may_not_change_the_stream_flag(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=chain("tests.support.policies:FlipStream"))
    for stream in (False, True):
        response = httpx2.post(f"{url}/v1/messages", json=request_body(stream=stream))
        assert response.status_code == 500
        assert response.json()["error"]["type"] == "api_error"
    assert upstream.requests == []


def test_query_string_is_forwarded(make_gateway: GatewayFactory, upstream: FakeUpstream) -> None:
    url = make_gateway()
    response = httpx2.post(f"{url}/v1/messages?beta=true", json=request_body())
    assert response.status_code == 200
    assert upstream.requests[0].query == "beta=true"


def test_lone_surrogate_survives_a_rewriting_policy(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=chain("string_replace", replacements=[["x", "y"]]))
    raw = b'{"model": "claude-sonnet-4-6", "max_tokens": 5, "messages":'
    raw += b' [{"role": "user", "content": "x \\ud800 x"}]}'
    response = httpx2.post(f"{url}/v1/messages", content=raw)
    assert response.status_code == 200
    assert upstream.requests[0].json["messages"][0]["content"] == "y \ud800 y"


def test_number_out_of_float_range_is_refused_not_altered(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=chain("string_replace", replacements=[["x", "y"]]))
    raw = b'{"model": "claude-sonnet-4-6", "max_tokens": 5, "temperature": 1e999,'
    raw += b' "messages": [{"role": "user", "content": "x"}]}'
    response = httpx2.post(f"{url}/v1/messages", content=raw)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert upstream.requests == []


def test_non_ascii_header_value_is_a_400_not_a_500(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    response = httpx2.post(
        f"{url}/v1/messages",
        json=request_body(),
        headers=[(b"x-custom", "caf\xe9".encode("latin-1"))],
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert upstream.requests == []


def test_gateway_retries_spent_tell_the_sdk_not_to_retry(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_max_retries=1)
    overloaded = Reply.error(529, "overloaded_error")
    overloaded.headers["retry-after-ms"] = "1"
    upstream.script(overloaded, overloaded)
    response = httpx2.post(f"{url}/v1/messages", json=request_body())
    assert response.status_code == 529
    assert response.headers["x-should-retry"] == "false"
    assert len(upstream.requests) == 2


def test_without_gateway_retries_the_sdk_may_still_retry(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_max_retries=0)
    upstream.script(Reply.error(529, "overloaded_error"))
    response = httpx2.post(f"{url}/v1/messages", json=request_body())
    assert response.status_code == 529
    assert "x-should-retry" not in response.headers


def test_healthz_fails_when_the_gateway_could_not_be_built(make_gateway: GatewayFactory) -> None:
    url = make_gateway(upstream_base_url="api.anthropic.com")
    # The build fails in the background while the server comes up.
    eventually(lambda: httpx2.get(f"{url}/healthz").status_code == 503, interval=0.05)
    response = httpx2.post(f"{url}/v1/messages", json=request_body())
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "api_error"


def test_a_cpu_bound_request_hook_never_stalls_other_calls(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=chain("tests.support.policies:BusyUntilReleased"))
    BUSY_STARTED.clear()
    BUSY_RELEASED.clear()
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(httpx2.post, f"{url}/v1/messages", json=request_body(), timeout=60)
        assert BUSY_STARTED.wait(30)
        try:
            # The hook spins on the policy worker's loop; the serving loop still answers.
            assert httpx2.get(f"{url}/healthz", timeout=10).status_code == 200
            assert not busy.done()
        finally:
            BUSY_RELEASED.set()
        assert busy.result().status_code == 200
