"""What a call's log line says about its way upstream, on every route: the tries, the request id."""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx2
import pytest
from policy_gateway.settings import Settings
from policy_gateway.upstream import client as upstream_client
from policy_gateway.upstream.client import Tries, UpstreamClient
from policy_gateway.upstream.errors import UpstreamUnavailable

from .support.client import HEADERS, request_body
from .support.fake_upstream import FakeUpstream, Reply, message
from .support.gateway import GatewayFactory, GatewayStdout


def overloaded() -> Reply:
    """A retryable answer that asks for an immediate retry (so the test never waits)."""
    reply = Reply.error(529, "overloaded_error")
    reply.headers["retry-after-ms"] = "1"
    return reply


def not_found(request_id: str) -> Reply:
    reply = Reply.error(404, "not_found_error")
    reply.headers["request-id"] = request_id
    return reply


@contextmanager
def dropping_upstream(drops: int, answer: bytes) -> Iterator[str]:
    """An upstream on loopback that closes its first `drops` connections unanswered (a
    connection error to the gateway), then answers each request with the raw `answer`."""
    accepted = 0
    lock = threading.Lock()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            nonlocal accepted
            with lock:
                accepted += 1
                dropped = accepted <= drops
            if dropped:
                return
            length = 0
            while (line := self.rfile.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            self.rfile.read(length)
            self.wfile.write(answer)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join(timeout=10)


def test_batch_and_passthrough_call_lines_carry_the_upstream_request_id(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway()
    batch = {"id": "msgbatch_1", "type": "message_batch", "results_url": None}
    upstream.script(
        Reply(body={"data": [], "has_more": False}, headers={"request-id": "req_models"}),
        Reply(body=batch, headers={"request-id": "req_create"}),
        Reply(body=batch, headers={"request-id": "req_retrieve"}),
        not_found("req_results"),
    )
    assert httpx2.get(f"{url}/v1/models", headers=HEADERS).status_code == 200
    entry = {"custom_id": "a", "params": request_body()}
    created = httpx2.post(f"{url}/v1/messages/batches", json={"requests": [entry]}, headers=HEADERS)
    assert created.status_code == 200
    batch_url = f"{url}/v1/messages/batches/msgbatch_1"
    assert httpx2.get(batch_url, headers=HEADERS).status_code == 200
    assert httpx2.get(f"{batch_url}/results", headers=HEADERS).status_code == 404
    lines = gateway_stdout.call_lines(4)
    assert [(line["endpoint"], line["upstream_request_id"]) for line in lines] == [
        ("models", "req_models"),
        ("batch_create", "req_create"),
        ("batch_retrieve", "req_retrieve"),
        ("batch_results", "req_results"),
    ]
    assert all(line["attempts"] == 1 for line in lines)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_call_line_counts_every_try_the_upstream_client_made(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    stream: bool,
) -> None:
    url = make_gateway(upstream_max_retries=3)
    upstream.script(overloaded(), overloaded(), overloaded())
    response = httpx2.post(f"{url}/v1/messages", json=request_body(stream=stream), headers=HEADERS)
    assert response.status_code == 200
    (line,) = gateway_stdout.call_lines(1)
    assert len(upstream.requests) == 4
    assert line["attempts"] == 4
    assert line["upstream_request_id"] == "req_fake"


def test_a_try_that_never_connected_is_counted_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three connection errors, then an answer: four requests sent, four tries counted."""
    monkeypatch.setattr(upstream_client, "retry_delay", lambda retry, headers: 0.0)
    sent: list[httpx2.Request] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        if len(sent) <= 3:
            raise httpx2.ConnectError("refused", request=request)
        return httpx2.Response(200, json=message("hi"), headers={"request-id": "req_4"})

    config = Settings(upstream_base_url="http://upstream.invalid", upstream_max_retries=3)
    client = UpstreamClient(config, transport=httpx2.MockTransport(upstream))

    async def send(tries: Tries) -> str | None:
        try:
            answer = await client.attempt(
                "/v1/messages", b"{}", [], stream=False, label="policy", tries=tries
            )
            answer.span.end()
            return answer.request_id
        finally:
            await client.aclose()

    tries = Tries()
    assert anyio.run(send, tries) == "req_4"
    assert (len(sent), tries.count) == (4, 4)

    refused = Tries()
    sent.clear()
    client = UpstreamClient(
        Settings(upstream_base_url="http://upstream.invalid", upstream_max_retries=1),
        transport=httpx2.MockTransport(upstream),
    )
    with pytest.raises(UpstreamUnavailable):
        anyio.run(send, refused)
    assert (len(sent), refused.count) == (2, 2)


def test_the_call_line_counts_tries_that_never_got_an_answer(
    make_gateway: GatewayFactory,
    gateway_stdout: GatewayStdout,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through a real gateway: three connections dropped, then an answer; the call's line
    says four tries and names the answer's request id."""
    monkeypatch.setattr(upstream_client, "retry_delay", lambda retry, headers: 0.0)
    body = json.dumps(message("hi")).encode()
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nrequest-id: req_after_drops\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )
    with dropping_upstream(3, answer) as upstream_url:
        url = make_gateway(upstream_base_url=upstream_url, upstream_max_retries=3)
        response = httpx2.post(f"{url}/v1/messages", json=request_body(), headers=HEADERS)
    assert response.status_code == 200
    assert response.json()["content"] == message("hi")["content"]
    (line,) = gateway_stdout.call_lines(1)
    assert (line["attempts"], line["upstream_request_id"]) == (4, "req_after_drops")
