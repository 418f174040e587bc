"""How far the relay trusts its upstream: status lines, headers, encodings, sizes and framing.

The upstream is the API, or whatever answers in its place (a proxy, a
misconfigured endpoint, an attacker on the path): what it says may not
redirect a client around the gateway, fail the call it came with, leak a
connection, balloon memory, or reach another caller's call.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx2
import pytest
from gateway_policies.testing import message_start
from policy_gateway import names

from .support.client import HEADERS, request_body
from .support.fake_upstream import FakeUpstream, Reply, message, text_events
from .support.framings import sse_reply, stop, wire
from .support.gateway import GatewayFactory, GatewayStdout

REDIRECTED = "/redirected/v1/messages"
both = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


def ask(url: str, stream: bool, text: str = "hello", **kwargs: Any) -> str:
    """One SDK call (with the SDK's own retries and redirect following); the answer's text."""
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test-key", **kwargs)
    params: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
    }
    if stream:
        with client.messages.stream(**params) as events:
            final = events.get_final_message()
    else:
        final = client.messages.create(**params)
    block = final.content[0]
    assert block.type == "text"
    return block.text


# --- item 9: an upstream 3xx -------------------------------------------------------------


def redirect(status: int, target: str) -> Reply:
    return Reply(
        status=status,
        body={"moved": True},
        headers={"location": target, "request-id": "req_redirect"},
    )


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@both
def test_an_upstream_redirect_is_a_502_the_sdk_never_follows(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    upstream_url: str,
    status: int,
    stream: bool,
) -> None:
    url = make_gateway(upstream_max_retries=2)
    upstream.script(redirect(status, upstream_url + REDIRECTED))
    with pytest.raises(anthropic.InternalServerError) as raised:
        ask(url, stream)  # the SDK's default client: retries on, redirects followed
    assert raised.value.status_code == 502
    assert raised.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "redirect" in raised.value.message
    assert "location" not in raised.value.response.headers
    # Neither the gateway nor the SDK asked again, and nobody asked the named host.
    assert [r.path for r in upstream.requests] == ["/v1/messages"]


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda c: c.messages.count_tokens(model="m", messages=[]), "/v1/messages/count_tokens"),
        (lambda c: c.messages.batches.retrieve("msgbatch_01"), "/v1/messages/batches/msgbatch_01"),
        (lambda c: c.messages.batches.list(), "/v1/messages/batches"),
        (lambda c: c.models.list(), "/v1/models"),
        (
            lambda c: c.messages.batches.create(
                requests=[
                    {
                        "custom_id": "a",
                        "params": {"model": "m", "max_tokens": 1, "messages": []},
                    }
                ]
            ),
            "/v1/messages/batches",
        ),
    ],
    ids=["count-tokens", "batch-retrieve", "batch-list", "models", "batch-create"],
)
def test_every_route_answers_an_upstream_redirect_with_a_502(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    upstream_url: str,
    call: Callable[[anthropic.Anthropic], object],
    path: str,
) -> None:
    url = make_gateway()
    upstream.script(redirect(307, upstream_url + REDIRECTED))
    with pytest.raises(anthropic.InternalServerError) as raised:
        call(anthropic.Anthropic(base_url=url, api_key="sk-ant-test-key"))
    assert raised.value.status_code == 502
    assert "location" not in raised.value.response.headers
    assert [r.path for r in upstream.requests] == [path]


def test_an_upstream_location_never_reaches_the_client(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(
        Reply(body=message("hi"), headers={"location": "http://127.0.0.1:9/elsewhere"}),
        Reply(status=201, body={"data": []}, headers={"location": "http://127.0.0.1:9/x"}),
    )
    response = httpx2.post(f"{url}/v1/messages", json=request_body(), headers=HEADERS)
    assert response.status_code == 200
    assert "location" not in response.headers
    listed = httpx2.get(f"{url}/v1/models", headers=HEADERS)
    assert listed.status_code == 201
    assert "location" not in listed.headers


# --- item 10: headers outside Latin-1, a body that is not what its encoding says ----------


@both
def test_a_header_value_outside_latin_1_is_dropped_and_the_call_goes_on(
    make_gateway: GatewayFactory, upstream: FakeUpstream, stream: bool
) -> None:
    url = make_gateway(upstream_max_retries=1)
    odd = {"x-note": "€ caf\u00e9", "request-id": "req_euro"}
    throttled = Reply.error(429, "rate_limit_error")
    throttled.headers.update(odd, **{"retry-after-ms": "10"})
    refused = Reply.error(400, "invalid_request_error", "bad request")
    refused.headers.update(odd)
    upstream.script(
        throttled,
        Reply(events=text_events(["fine"]), headers=odd)
        if stream
        else Reply(body=message("fine"), headers=odd),
        refused,
    )
    assert ask(url, stream, max_retries=0) == "fine"  # the 429 was retried
    assert len(upstream.requests) == 2
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(url, stream, max_retries=0)
    assert raised.value.body["error"]["message"] == "bad request"  # type: ignore[index]


def test_odd_headers_leak_no_upstream_connection(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    """Sixty calls, half of them streams, each answered with a header outside Latin-1:
    every connection goes back to the pool, so the gateway never opens a second one."""
    url = make_gateway()
    odd = {"x-note": "€"}
    calls = 60
    statuses = []
    for index in range(calls):
        stream = index % 2 == 0
        upstream.script(
            Reply(events=text_events(["ok"]), headers=odd)
            if stream
            else Reply(body=message("ok"), headers=odd)
        )
        response = httpx2.post(
            f"{url}/v1/messages", json=request_body(stream=stream), headers=HEADERS, timeout=10
        )
        statuses.append(response.status_code)
    connections = {r.connection for r in upstream.requests}
    assert len(upstream.requests) == calls
    assert len(connections) == 1, f"{len(connections)} upstream connections for {calls} calls"
    assert statuses == [200] * calls


NOT_GZIP = b'{"type": "message", "content": []}'


@pytest.mark.parametrize(
    ("path", "body", "reply"),
    [
        ("/v1/messages", request_body(), Reply(raw=NOT_GZIP, content_type="application/json")),
        (
            "/v1/messages",
            request_body(stream=True),
            Reply(chunks=lambda: iter([b"event: ping\n"]), content_type="text/event-stream"),
        ),
        ("/v1/models", None, Reply(raw=NOT_GZIP, content_type="application/json")),
        ("/v1/messages/batches/msgbatch_1", None, Reply(raw=NOT_GZIP)),
    ],
    ids=["json", "sse", "models", "batch"],
)
def test_a_body_that_is_not_the_gzip_it_claims_is_a_502(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    path: str,
    body: dict[str, Any] | None,
    reply: Reply,
) -> None:
    url = make_gateway()
    reply.headers["content-encoding"] = "gzip"
    upstream.script(reply)
    method = "POST" if body is not None else "GET"
    response = httpx2.request(method, url + path, json=body, headers=HEADERS, timeout=10)
    assert response.status_code == 502, response.text
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "api_error"
    assert len(upstream.requests) == 1


def test_a_stream_the_upstream_compressed_reaches_the_sdk_decoded(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    """A coded stream is decoded (an uncoded one is read raw, the relay's faster path), split
    anywhere by the compression: the SDK assembles the same message."""
    url = make_gateway()
    frames = b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        for name, data in text_events(["com", "pressed"])
    )
    coder = zlib.compressobj(wbits=31)
    coded = coder.compress(frames) + coder.flush()
    upstream.script(
        Reply(
            chunks=lambda: iter([coded[:30], coded[30:]]),
            content_type="text/event-stream",
            headers={"content-encoding": "gzip"},
        )
    )
    assert ask(url, stream=True) == "compressed"


# --- item 11: an answer's size -----------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/batches/msgbatch_1"])
def test_an_answer_past_the_cap_is_a_502_and_never_held_whole(
    make_gateway: GatewayFactory, upstream: FakeUpstream, path: str
) -> None:
    """A 64 MB answer of tiny blocks against a 1 MiB cap: refused once the cap passes,
    and the memory the process allocated meanwhile (the gateway runs in this process)
    never came near the answer's size."""
    url = make_gateway(upstream_max_answer_bytes=1024 * 1024)
    block = b'{"type": "text", "text": "x"},' * 2000

    def chunks() -> Iterator[bytes]:
        yield b'{"type": "message", "role": "assistant", "content": ['
        for _ in range(64 * 1024 * 1024 // len(block)):
            yield block
        yield b'{"type": "text", "text": "end"}]}'

    upstream.script(Reply(chunks=chunks, content_type="application/json"))
    method = "POST" if path == "/v1/messages" else "GET"
    tracemalloc.start()
    try:
        response = httpx2.request(
            method,
            url + path,
            json=request_body() if method == "POST" else None,
            headers=HEADERS,
            timeout=60,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 502, response.text[:200]
    assert response.json()["error"]["type"] == "api_error"
    assert "UPSTREAM_MAX_ANSWER_BYTES" in response.json()["error"]["message"]
    assert peak < 16 * 1024 * 1024, f"peak {peak} bytes"


def test_an_answer_within_the_cap_is_relayed(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_max_answer_bytes=64 * 1024)
    upstream.script(Reply(body=message("y" * 32 * 1024)))
    assert ask(url, False, max_retries=0) == "y" * 32 * 1024


# --- item 13: framing the upstream controls ----------------------------------------------


class SmugglingUpstream:
    """A keep-alive upstream on a raw socket whose first answer carries more than its
    `content-length` says: a whole second answer, meant for whoever asks next."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._converse, args=(conn,), daemon=True).start()

    def _converse(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the gateway drops a poisoned connection
            self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        buffered = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffered:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffered += chunk
                head, _, buffered = buffered.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(buffered) < length:
                    buffered += conn.recv(65536)
                body, buffered = json.loads(buffered[:length]), buffered[length:]
                self.requests += 1
                text = body["messages"][-1]["content"]
                answer = _http(_answer(f"echo: {text}", body.get("stream") is True))
                if self.requests == 1:
                    answer += _http(
                        _answer("LEAKED to the next caller", body.get("stream") is True)
                    )
                conn.sendall(answer)

    def close(self) -> None:
        self._server.close()


def _answer(text: str, stream: bool) -> tuple[bytes, bytes]:
    if not stream:
        return b"application/json", json.dumps(message(text)).encode()
    frames = [
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        for name, data in text_events([text])
    ]
    return b"text/event-stream", b"".join(frames)


def _http(answer: tuple[bytes, bytes]) -> bytes:
    content_type, body = answer
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type + b"\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


@pytest.fixture
def smuggler() -> Iterator[SmugglingUpstream]:
    server = SmugglingUpstream()
    yield server
    server.close()


@both
def test_bytes_past_an_answers_framing_never_reach_the_next_caller(
    make_gateway: GatewayFactory, smuggler: SmugglingUpstream, stream: bool
) -> None:
    url = make_gateway(upstream_base_url=smuggler.url, upstream_max_retries=2)
    assert ask(url, stream, "first caller", max_retries=0) == "echo: first caller"
    assert ask(url, stream, "second caller", max_retries=0) == "echo: second caller"
    # The second call went out on the poisoned connection, was refused, and
    # was asked again on a fresh one; the third reuses that fresh one.
    assert ask(url, stream, "third caller", max_retries=0) == "echo: third caller"
    assert smuggler.connections == 2


# --- items 7 and 13: how a stream that ended with an `error` event is logged and counted ----


def overloaded() -> tuple[str, dict[str, Any]]:
    error = {"type": "overloaded_error", "message": "Overloaded"}
    return ("error", {"type": "error", "error": error})


def test_a_stream_cut_by_an_upstream_error_event_is_logged_with_that_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    """The upstream sends an `error` event and holds the stream open: the SDK raises and
    hangs up first, and the call line still says the upstream's error, not 499."""
    url = make_gateway()
    upstream.script(Reply(events=[*text_events(["partial"])[:4], overloaded()], event_delay=0.5))
    with pytest.raises(anthropic.APIStatusError) as raised:
        ask(url, True, max_retries=0)
    assert raised.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    (line,) = gateway_stdout.call_lines(1)
    assert line["status"] == 529
    assert line["stream_error"] == "overloaded_error"
    assert gateway_stdout.counted(names.METRIC_RESPONSES_5XX) == 1


def test_a_stream_the_gateway_ends_with_an_error_event_is_logged_with_its_status(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway()
    upstream.script(sse_reply(wire(message_start(), stop(3))))  # a block that never started
    with pytest.raises(anthropic.APIStatusError) as raised:
        ask(url, True, max_retries=0)
    assert raised.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    (line,) = gateway_stdout.call_lines(1)
    assert line["status"] == 502
    assert line["stream_error"] == "api_error"
    assert gateway_stdout.counted(names.METRIC_RESPONSES_5XX) == 1


# --- item 12: one stream event's size ----------------------------------------------------


def big_delta(size: int) -> bytes:
    data = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "z" * size},
    }
    return f"event: content_block_delta\ndata: {json.dumps(data)}\n\n".encode()


def test_an_event_past_the_cap_ends_a_started_stream_with_one_error_event(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway(upstream_max_answer_bytes=64 * 1024)
    head = [f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in text_events(["a"])[:4]]
    oversized = big_delta(256 * 1024)
    # The oversized event trickles in 4 KB pieces, and no blank line ever ends it.
    upstream.script(
        sse_reply([*head, *(oversized[i : i + 4096] for i in range(0, len(oversized), 4096))])
    )
    response = httpx2.post(
        f"{url}/v1/messages", json=request_body(stream=True), headers=HEADERS, timeout=30
    )
    assert response.status_code == 200
    frames = [f for f in response.text.split("\n\n") if f]
    assert [f.split("\n")[0] for f in frames[-2:]] == [
        "event: content_block_delta",
        "event: error",
    ]
    error = json.loads(frames[-1].split("data: ", 1)[1])["error"]
    assert error["type"] == "api_error"
    assert "65536 bytes" in error["message"]
    (line,) = gateway_stdout.call_lines(1)
    assert line["status"] == 502


def test_an_event_past_the_cap_before_the_first_is_a_502(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(upstream_max_answer_bytes=64 * 1024)
    upstream.script(sse_reply([b"event: message_start\ndata: " + b"x" * 128 * 1024]))
    with pytest.raises(anthropic.InternalServerError) as raised:
        ask(url, True, max_retries=0)
    assert raised.value.status_code == 502
    assert "65536 bytes" in raised.value.body["error"]["message"]  # type: ignore[index]
