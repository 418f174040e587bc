"""Stand-ins for where the gateway's spans go, decoding what arrives as a backend would.

`XRayEndpoint` is a UDP socket in place of the X-Ray endpoint Lambda runs
(AWS_XRAY_DAEMON_ADDRESS); `OTLPReceiver` is an OTLP/HTTP collector served on
loopback. Both parse the OTLP protobuf with opentelemetry-proto, so a test sees
the spans' names, ids and typed attributes exactly as X-Ray or a collector
would receive them.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from starlette.types import Receive, Scope, Send

# The span attribute listing the keys X-Ray indexes as annotations (spans.XRAY_ANNOTATIONS,
# written out here so the test holds the gateway to X-Ray's name, not to its own constant).
XRAY_ANNOTATIONS = "aws.xray.annotations"
SPAN_KIND_INTERNAL = 1
SPAN_KIND_SERVER = 2
STATUS_ERROR = 2


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    items: list[KeyValue] = list(pairs)
    return {pair.key: _value(pair.value) for pair in items}


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status: int
    attributes: dict[str, Any]
    resource: dict[str, Any]

    @property
    def xray_trace_id(self) -> str:
        """The trace id as X-Ray writes it: 1-<8 hex of epoch seconds>-<24 hex>."""
        return f"1-{self.trace_id[:8]}-{self.trace_id[8:]}"

    @property
    def annotations(self) -> dict[str, Any]:
        """The attributes X-Ray turns into searchable annotations."""
        listed = self.attributes.get(XRAY_ANNOTATIONS, [])
        return {key: self.attributes[key] for key in listed if key in self.attributes}


def spans_of(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    received = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        status=span.status.code,
                        attributes=_attributes(span.attributes),
                        resource=resource,
                    )
                )
    return received


def decode_datagram(datagram: bytes) -> bytes:
    """The OTLP protobuf in one datagram to the X-Ray endpoint, checking its framing."""
    header, newline, body = datagram.partition(b"\n")
    assert newline, datagram[:80]
    assert json.loads(header) == {"format": "json", "version": 1}, header
    assert body.startswith(b"T1S"), body[:10]
    return base64.b64decode(body[3:], validate=True)


class XRayEndpoint:
    """A UDP socket standing in for Lambda's X-Ray endpoint."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Room for bursts: a test may send many calls' spans before it reads any.
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.setblocking(False)
        self.datagrams: list[bytes] = []

    @property
    def address(self) -> str:
        host, port = self._socket.getsockname()
        return f"{host}:{port}"

    def drain(self, expect: int = 0, seconds: float = 5.0) -> list[bytes]:
        """Every datagram so far, waiting up to `seconds` until there are `expect` of them."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.datagrams.append(self._socket.recv(65536))
                continue
            except BlockingIOError:
                pass
            if len(self.datagrams) >= expect or time.monotonic() > deadline:
                return self.datagrams
            time.sleep(0.01)

    def payloads(self, expect: int = 0) -> list[bytes]:
        """The decoded OTLP protobuf of every datagram (where a planted string would show)."""
        return [decode_datagram(datagram) for datagram in self.drain(expect)]

    def spans(self, expect: int = 0) -> list[ReceivedSpan]:
        """Every span received; waits for `expect` spans (one datagram carries one span)."""
        return [
            span
            for payload in self.payloads(expect)
            for span in spans_of(ExportTraceServiceRequest.FromString(payload))
        ]

    def close(self) -> None:
        self._socket.close()


@dataclass
class OTLPReceiver:
    """An OTLP/HTTP collector's trace endpoint (POST /v1/traces, protobuf), as an ASGI app."""

    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        with self._lock:
            self.requests.append((scope["path"], headers, body))
        reply = b"" if scope["path"] == "/v1/traces" else b"not found"
        await send(
            {
                "type": "http.response.start",
                "status": 200 if not reply else 404,
                "headers": [(b"content-type", b"application/x-protobuf")],
            }
        )
        await send({"type": "http.response.body", "body": reply})

    def spans(self, expect: int = 0, seconds: float = 10.0) -> list[ReceivedSpan]:
        """Every span posted so far, waiting up to `seconds` until there are `expect`."""
        deadline = time.monotonic() + seconds
        while True:
            with self._lock:
                bodies = [body for path, _, body in self.requests if path == "/v1/traces"]
            received = [
                span
                for body in bodies
                for span in spans_of(ExportTraceServiceRequest.FromString(body))
            ]
            if len(received) >= expect or time.monotonic() > deadline:
                return received
            time.sleep(0.02)


def xray_header(sampled: str = "1") -> tuple[str, str, str]:
    """A Function URL trace header: (header, Root, Parent)."""
    root = f"1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]}"
    parent = uuid.uuid4().hex[:16]
    return f"Root={root};Parent={parent};Sampled={sampled}", root, parent
