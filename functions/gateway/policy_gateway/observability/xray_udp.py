"""Spans to the X-Ray endpoint Lambda runs beside a function with active tracing.

Imported by tracing.py only, and only when tracing is on in Lambda: nothing
else in the gateway touches OpenTelemetry.

The endpoint is the X-Ray daemon's UDP socket (AWS_XRAY_DAEMON_ADDRESS, which
Lambda sets). Besides the X-Ray SDK's JSON segments it accepts OpenTelemetry
spans; each datagram is

    {"format":"json","version":1}\\n  T1S  base64(OTLP ExportTraceServiceRequest)

(the daemon's protocol header line, `T1S` for sampled spans, then the spans in
OTLP's protobuf encoding). This is the transport the AWS Distro for
OpenTelemetry uses in Lambda, so no collector layer and no network hop are
needed, and X-Ray turns the spans into subsegments of the function's segment.

Why not the Distro's own `OTLPUdpSpanExporter`: `aws-opentelemetry-distro`
pins exact versions of about sixty packages (every auto-instrumentation,
gRPC, PyYAML) that the function would carry to every cold start and that
would fight the version ranges of the gateway's own dependencies. The wire
format above is small, so the gateway sends it itself on top of
`opentelemetry-exporter-otlp-proto-common`'s OTLP encoder.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

PROTOCOL_HEADER = b'{"format":"json","version":1}\n'
# Only sampled spans reach an exporter (the SDK drops the others before), so
# the unsampled prefix (`T1U`) is never sent.
SAMPLED_PREFIX = b"T1S"


def parse_daemon_address(value: str) -> tuple[str, int]:
    """The UDP (host, port) of AWS_XRAY_DAEMON_ADDRESS.

    Lambda sets `host:port`; the X-Ray SDKs also accept separate listeners,
    `tcp:host:port udp:host:port`, of which spans go to the UDP one.
    """
    parts = value.split()
    if len(parts) == 1 and not parts[0].startswith(("tcp:", "udp:")):
        address = parts[0]
    else:
        address = next((part[4:] for part in parts if part.startswith("udp:")), "")
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port or 'tcp:host:port udp:host:port' address: {value!r}")
    return host, int(port)


class XRayUdpSpanExporter(SpanExporter):
    """Sends each batch of finished spans as one datagram, never blocking the caller.

    A datagram that cannot leave (a full socket buffer, one over UDP's 64 KB)
    is dropped and reported as a failed export: a trace is never worth
    holding a call for.
    """

    def __init__(self, address: str) -> None:
        host, port = parse_daemon_address(address)
        # Resolved once: a name lookup per span would block the event loop.
        resolved = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        self._address: tuple[Any, ...] = resolved[4]
        self._socket = socket.socket(resolved[0], socket.SOCK_DGRAM)
        self._socket.setblocking(False)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = encode_spans(spans).SerializeToString()
        datagram = PROTOCOL_HEADER + SAMPLED_PREFIX + base64.b64encode(request)
        try:
            self._socket.sendto(datagram, self._address)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._socket.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
