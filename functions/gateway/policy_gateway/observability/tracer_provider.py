"""OpenTelemetry's tracer for the gateway: where its spans go, built once, only with tracing on.

In Lambda, straight to the function's X-Ray endpoint over UDP (xray_udp.py);
elsewhere to the OTLP/HTTP endpoint OTEL_EXPORTER_OTLP_ENDPOINT names. Span
ids are X-Ray's, so one trace reads the same in X-Ray and any OTLP backend.
Importing this module imports the OpenTelemetry SDK: tracing.py does so only
when tracing is on.
"""

from __future__ import annotations

from opentelemetry.sdk.extension.aws.trace import AwsXRayIdGenerator
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.trace import Tracer

from .. import settings
from .logs import logger
from .tracing_settings import TracingSettings


def tracer(config: TracingSettings) -> Tracer | None:
    """The gateway's tracer, or None when its exporter cannot start (tracing stays off)."""
    in_lambda = config.in_lambda
    processor: SpanProcessor
    try:
        if in_lambda:
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor

            from .xray_udp import XRayUdpSpanExporter

            address = config.xray_daemon_address
            processor = SimpleSpanProcessor(XRayUdpSpanExporter(address))
            destination = f"x-ray udp {address}"
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            processor = BatchSpanProcessor(OTLPSpanExporter())
            destination = "otlp/http"
    except (ValueError, OSError) as exc:
        # A tracing misconfiguration must never cost the gateway its traffic.
        logger.warning("tracing off: its exporter could not start", extra={"error": str(exc)})
        return None
    configured = OTELResourceDetector().detect().attributes.get(SERVICE_NAME)
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: str(configured or settings.service_name())}),
        id_generator=AwsXRayIdGenerator(),
    )
    provider.add_span_processor(processor)
    logger.info("tracing on", extra={"traces_to": destination})
    return provider.get_tracer("policy_gateway")
