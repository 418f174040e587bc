"""Client input that used to become a misleading upstream failure, and an upstream status
no HTTP table knows (issue 21, item 6).

A header value the upstream client cannot send was counted as an upstream
connection error, retried with backoff and answered 502; it is the client's
error, a 400 before any attempt. An upstream status outside the HTTP tables
(999) made the server raise and close the connection with no answer; it is a
502 `api_error` on every route, JSON and stream.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import httpx2
import pytest
from policy_gateway import names
from policy_gateway.errors import GatewayError
from policy_gateway.headers import forwarded_headers

from .support.fake_upstream import MODEL, FakeUpstream
from .support.gateway import GatewayFactory, GatewayStdout

HEADERS = {"x-api-key": "sk-ant-test-key-0123456789", "anthropic-version": "2023-06-01"}
HEADERS_BYTES = [(key.encode(), value.encode()) for key, value in HEADERS.items()]
BODY = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    "value",
    [b"a ", b"a\t", b"a \t "],
    ids=["trailing-space", "trailing-tab", "trailing-mixed"],
)
def test_an_unsendable_header_value_is_400_before_any_upstream_attempt(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    value: bytes,
) -> None:
    url = make_gateway(upstream_max_retries=2)
    response = raw_post(url, [(b"x-custom", value)])
    assert response.startswith(b"HTTP/1.1 400 "), response[:200]
    assert b'"invalid_request_error"' in response
    assert b"x-custom" in response
    assert upstream.requests == []
    assert names.METRIC_UPSTREAM_CONNECTION_ERRORS not in gateway_stdout.text


@pytest.mark.parametrize("value", [b" a", b"a ", b"\ta", b"a\rb", b"a\nb", b"a\x7fb", b"a\x01b"])
def test_a_value_the_server_would_have_trimmed_is_refused_too(value: bytes) -> None:
    """Leading whitespace and control characters never arrive over HTTP/1.1 (the server
    trims or refuses them); another front end (the adapter) could pass them on."""
    with pytest.raises(GatewayError) as caught:
        forwarded_headers([(b"x-custom", value)], None)
    assert caught.value.status == 400
    assert caught.value.error_type == "invalid_request_error"
    assert forwarded_headers([(b"x-custom", b"a  b"), (b"x-empty", b"")], None)[:2] == [
        ("x-custom", "a  b"),
        ("x-empty", ""),
    ]


def raw_post(url: str, extra: list[tuple[bytes, bytes]]) -> bytes:
    """A request written byte for byte, since HTTP clients refuse such values themselves."""
    host, port = url.removeprefix("http://").split(":")
    body = httpx2.Request("POST", url, json=BODY).read()
    head = [
        b"POST /v1/messages HTTP/1.1",
        b"host: " + host.encode(),
        b"content-type: application/json",
        b"content-length: " + str(len(body)).encode(),
        b"connection: close",
        *(key + b": " + value for key, value in HEADERS_BYTES),
        *(key + b": " + value for key, value in extra),
    ]
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


class OddStatusUpstream:
    """An upstream that answers every request with a status no HTTP table has.

    A raw socket, since an ASGI server refuses to send such a status itself.
    """

    def __init__(self, status: int) -> None:
        self.status = status
        self.requests = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(65536)
            if not chunk:
                return
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            body += conn.recv(65536)
        self.requests += 1
        payload = b'{"odd": true}'
        conn.sendall(
            f"HTTP/1.1 {self.status} Odd\r\ncontent-type: application/json\r\n"
            f"request-id: req_odd\r\ncontent-length: {len(payload)}\r\n"
            "connection: close\r\n\r\n".encode()
            + payload
        )

    def close(self) -> None:
        self._server.close()


@pytest.fixture(params=[999, 600, 700])
def odd_upstream(request: pytest.FixtureRequest) -> Iterator[OddStatusUpstream]:
    server = OddStatusUpstream(request.param)
    yield server
    server.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/messages", BODY),
        ("POST", "/v1/messages", {**BODY, "stream": True}),
        ("POST", "/v1/messages/count_tokens", {"model": MODEL, "messages": BODY["messages"]}),
        ("GET", "/v1/models", None),
        ("GET", "/v1/messages/batches/msgbatch_0123", None),
    ],
    ids=["messages", "stream", "count-tokens", "models", "batches"],
)
def test_an_upstream_status_outside_the_http_tables_is_a_502_api_error(
    make_gateway: GatewayFactory,
    odd_upstream: OddStatusUpstream,
    method: str,
    path: str,
    body: object,
) -> None:
    url = make_gateway(upstream_base_url=odd_upstream.url)
    response = httpx2.request(method, url + path, json=body, headers=HEADERS, timeout=30)
    assert response.status_code == 502
    assert response.headers["content-type"] == "application/json"
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "api_error"
    assert str(odd_upstream.status) in response.json()["error"]["message"]
    assert odd_upstream.requests == 1
