"""X-Ray tracing, kept behind this one small module.

The X-Ray SDK reaches end of support in 2027; everything the gateway needs
from tracing is `begin_call`, `start_span`, `Span.annotate` and `Span.end`, so
an OpenTelemetry exporter can replace this file alone.

Tracing follows Powertools' rule: on when LAMBDA_TASK_ROOT is set (and
POWERTOOLS_TRACE_DISABLED is not true), off otherwise. Under the Lambda Web
Adapter the trace header arrives as the `x-amzn-trace-id` request header; the
X-Ray SDK's Lambda context reads it from `_X_AMZN_TRACE_ID`, so it is set per
call (Lambda runs one call at a time per process). Spans are explicit begin/end
pairs because a decorator's subsegment closes before an async generator
yields.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any, Protocol

from . import settings


class Span(Protocol):
    def annotate(self, key: str, value: bool | int | float | str) -> None: ...

    def end(self, error: BaseException | None = None) -> None: ...


class _NoSpan:
    def annotate(self, key: str, value: bool | int | float | str) -> None:
        pass

    def end(self, error: BaseException | None = None) -> None:
        pass


class _XRaySpan:
    def __init__(self, recorder: Any, subsegment: Any) -> None:
        self._recorder = recorder
        self._subsegment = subsegment
        self._open = True

    def annotate(self, key: str, value: bool | int | float | str) -> None:
        if self._open:
            self._subsegment.put_annotation(key, value)

    def end(self, error: BaseException | None = None) -> None:
        if not self._open:
            return
        self._open = False
        if error is not None:
            self._subsegment.add_exception(error, [])
        self._recorder.end_subsegment()


def enabled() -> bool:
    disabled = os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower()
    return bool(os.environ.get("LAMBDA_TASK_ROOT")) and disabled not in ("1", "true", "yes")


@cache
def _recorder() -> Any:
    from aws_lambda_powertools import Tracer

    tracer = Tracer(
        service=os.environ.get(settings.ENV_SERVICE_NAME) or settings.SERVICE_NAME,
        auto_patch=False,
    )
    return tracer.provider


def begin_call(trace_header: str | None) -> bool:
    """Point the X-Ray context at this call's trace; False when there is nothing to trace."""
    if not trace_header or not enabled():
        return False
    os.environ["_X_AMZN_TRACE_ID"] = trace_header
    return True


def start_span(name: str, traced: bool) -> Span:
    if not traced:
        return _NoSpan()
    recorder = _recorder()
    subsegment = recorder.begin_subsegment(name)
    if subsegment is None:
        return _NoSpan()
    return _XRaySpan(recorder, subsegment)
