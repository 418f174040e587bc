"""CloudWatch metrics in Embedded Metric Format (Powertools Metrics) on stdout.

Every metric carries exactly the dimension set [service], which is what the
template's alarm names. There is no Lambda handler under the Web Adapter, so
the gateway flushes after every call (for a stream, in its `finally`).
"""

from __future__ import annotations

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from .. import settings

_metrics = Metrics(namespace=settings.metrics_namespace(), service=settings.service_name())


def count(name: str, value: float = 1) -> None:
    _metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def milliseconds(name: str, value: float) -> None:
    _metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)


def flush() -> None:
    if _metrics.metric_set:
        _metrics.flush_metrics()


def discard() -> None:
    """Drop what is buffered unflushed: after a restore it belongs to the snapshot's process."""
    _metrics.clear_metrics()
