"""Tracing on OpenTelemetry, kept behind this one small module.

The gateway needs four things from tracing: `call` (a call's trace context,
held for the call's duration), `start_span` (one span per upstream attempt),
`Span.annotate` (a searchable X-Ray annotation) and `Span.end` (spans.py).
Outside this module and spans.py only tracer_provider.py and xray_udp.py
import OpenTelemetry, and they are loaded only from here, once tracing is on
(tracing_settings.py says when): with it off, a call costs a context-variable
lookup and no import.

Where spans go
- In Lambda (LAMBDA_TASK_ROOT set): to the X-Ray endpoint Lambda runs beside a
  function with active tracing (xray_udp.py), one datagram per span as it
  ends, so nothing is left in a buffer when Lambda freezes the sandbox. The
  Function URL's `x-amzn-trace-id` header (Root, Parent, Sampled) parents
  every attempt's span, so attempts show as subsegments of the function's
  segment, and its Sampled flag decides whether they are recorded, as with
  the X-Ray SDK. Without the header nothing is traced.
- Elsewhere (`serve` in a container or on a laptop): only when
  OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set,
  over OTLP/HTTP from a background thread, to any OpenTelemetry backend, with
  the exporter of the `otlp` extra (`check_exporter`: no start without it).
  Each call then has a server span of its own, named by its method and route
  template, parented by an incoming `x-amzn-trace-id` or W3C `traceparent`
  when there is one, with the attempts under it.
- OTEL_SDK_DISABLED=true, or POWERTOOLS_TRACE_DISABLED=true (the switch of the
  Powertools Tracer this replaced), turns tracing off everywhere.

The service name is OTEL_SERVICE_NAME (or `service.name` in
OTEL_RESOURCE_ATTRIBUTES), else POWERTOOLS_SERVICE_NAME, else
`policy-gateway`. Sampling is the SDK's own (OTEL_TRACES_SAMPLER and
OTEL_TRACES_SAMPLER_ARG, default `parentbased_always_on`). Trace ids the
gateway starts embed the time, as X-Ray requires, so a collector can forward
them to X-Ray as well.

Annotations (spans.py): `Span.annotate` makes an attribute one X-Ray indexes,
so `annotation.passthrough_fallback = true` finds the failed attempt as it did
under the X-Ray SDK. Every string attribute goes through the audit record's
bound (gateway_policies.recorder.text): a path, an upstream's request id or a
policy's name keeps its first 64 characters, so neither a client nor an
upstream can put content into a trace by making one long.

Concurrency: a call's trace context lives in a context variable, which each
call's task has to itself; nothing goes through the process environment, so
concurrent calls in one process (`serve`, Lambda multi-concurrency) never
cross their spans. Spans are explicit start/end pairs because an attempt's
span outlives the function that starts it (a stream ends later).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from gateway_policies import recorder

from .. import names
from ..headers import HeaderLookup
from .spans import NO_SPAN, AttemptSpan, Span, mark_error
from .tracing_settings import TracingSettings

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span as OTelSpan
    from opentelemetry.trace import Tracer

# Request headers that carry a caller's trace context, as the propagators name them.
_TRACE_HEADERS = {
    "X-Amzn-Trace-Id": b"x-amzn-trace-id",
    "traceparent": b"traceparent",
    "tracestate": b"tracestate",
}


@dataclass
class CallTrace:
    """What the endpoint tells tracing about a call (its status, for the call's span), and
    the trace's id for the call's log line: X-Ray's form in Lambda, W3C's elsewhere."""

    status: int = 0
    trace_id: str | None = None


def setup() -> None:
    """Import OpenTelemetry and build the exporter now, off the event loop, if tracing is on.

    The app calls this while it builds the gateway in a worker thread, so the
    first traced call does not pay for the imports.
    """
    _tracing()


def flush(timeout_millis: int = 2000) -> None:
    """Export every span still buffered (OTLP's batch), if tracing was ever set up.

    Before a snapshot: the batch's export thread is frozen with the process.
    """
    if _tracing.cache_info().currsize:
        built = _tracing()
        if built is not None:
            built.flush(timeout_millis)


@contextmanager
def call(
    header: HeaderLookup, method: str, path: str, route: str | None, call_id: str
) -> Iterator[CallTrace]:
    """Hold the call's trace context for the call's duration; its spans start under it.

    `route` is the path template the call matched (`/v1/messages/batches/{message_batch_id}`);
    the call's own span carries `call_id`, as its log line does.
    """
    trace = CallTrace()
    tracing = _tracing()
    if tracing is None:
        yield trace
        return
    parent, span = tracing.begin(header, method, path, route, call_id)
    if parent is not None:
        trace.trace_id = tracing.trace_id(parent.context)
    token = _call_parent.set(parent)
    try:
        yield trace
    finally:
        _call_parent.reset(token)
        if span is not None:
            tracing.finish(span, trace.status)


def start_span(name: str) -> Span:
    """A span for one upstream attempt, under the current call's trace (a no-op outside one)."""
    parent = _call_parent.get()
    if parent is None:
        return NO_SPAN
    return AttemptSpan(parent.tracer.start_span(name, context=parent.context))


@dataclass(frozen=True)
class _Parent:
    tracer: Tracer
    context: Context


_call_parent: ContextVar[_Parent | None] = ContextVar("policy_gateway_trace_parent", default=None)


class _Tracing:
    """The tracer, and how a call's trace context is found in its headers."""

    def __init__(self, tracer: Tracer, in_lambda: bool) -> None:
        from opentelemetry import trace
        from opentelemetry.propagators.aws import AwsXRayPropagator
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._tracer = tracer
        self._in_lambda = in_lambda
        self._xray = AwsXRayPropagator()
        self._w3c = TraceContextTextMapPropagator()
        self._trace = trace

    def begin(
        self, header: HeaderLookup, method: str, path: str, route: str | None, call_id: str
    ) -> tuple[_Parent | None, OTelSpan | None]:
        """What the call's attempts start under, and the call's own span if it has one.

        In Lambda the function's segment (the header's Parent) is the call's
        span already; elsewhere the gateway opens one.
        """
        carrier = {}
        for key, name in _TRACE_HEADERS.items():
            value = header(name)
            if value is not None:
                carrier[key] = value.decode("latin-1")
        context = self._xray.extract(carrier)
        remote = self._trace.get_current_span(context).get_span_context().is_valid
        if self._in_lambda:
            return (_Parent(self._tracer, context) if remote else None), None
        if not remote:
            context = self._w3c.extract(carrier)
        method = recorder.text(method)
        attributes = {
            "http.request.method": method,
            "url.path": recorder.text(path),
            names.ATTRIBUTE_CALL_ID: call_id,
        }
        if route is not None:
            attributes["http.route"] = recorder.text(route)
        # Named as OpenTelemetry's HTTP conventions say: the method and the
        # route's template, never the path itself, which can hold an id or a key.
        span = self._tracer.start_span(
            method if route is None else f"{method} {route}",
            context=context,
            kind=self._trace.SpanKind.SERVER,
            attributes=attributes,
        )
        return _Parent(self._tracer, self._trace.set_span_in_context(span, context)), span

    def flush(self, timeout_millis: int) -> None:
        # The SDK's tracer holds its provider's span processor; the API's type does not say so.
        processor = getattr(self._tracer, "span_processor", None)
        if processor is not None:
            processor.force_flush(timeout_millis)

    def trace_id(self, context: Context) -> str | None:
        """The trace's id as the backend spans go to shows it (X-Ray in Lambda)."""
        found = self._trace.get_current_span(context).get_span_context()
        if not found.is_valid:
            return None
        digits = f"{found.trace_id:032x}"
        return f"1-{digits[:8]}-{digits[8:]}" if self._in_lambda else digits

    @staticmethod
    def finish(span: OTelSpan, status: int) -> None:
        if status:
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                mark_error(span, str(status))
        span.end()


@cache
def _tracing() -> _Tracing | None:
    config = TracingSettings.from_env()
    if not config.enabled:
        return None
    from .tracer_provider import tracer

    built = tracer(config)
    return None if built is None else _Tracing(built, config.in_lambda)
