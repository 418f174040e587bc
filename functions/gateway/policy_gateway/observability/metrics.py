"""CloudWatch metrics in Embedded Metric Format (Powertools Metrics) on stdout.

Every metric carries exactly the dimension set [service], which is what the
template's alarm names, except the per-policy counts (`count_for_policy`),
written as their own EMF line with [service, policy]. There is no Lambda
handler under the Web Adapter, so the gateway flushes after every call (for a
stream, in its `finally`).
"""

from __future__ import annotations

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)

from .. import names, settings

_metrics = Metrics(namespace=settings.metrics_namespace(), service=settings.service_name())


def count(name: str, value: float = 1) -> None:
    _metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def count_for_policy(name: str, policy: str) -> None:
    """Count one for `policy`, dimensions [service, policy], flushed now as its own line.

    A provider of its own: the shared `Metrics` keeps one dimension set for
    every metric of the call, and those must stay [service] alone.
    """
    line = AmazonCloudWatchEMFProvider(
        namespace=settings.metrics_namespace(),
        service=settings.service_name(),
        default_dimensions={
            names.METRICS_SERVICE_DIMENSION: settings.service_name(),
            names.METRICS_POLICY_DIMENSION: policy,
        },
    )
    line.add_metric(name=name, unit=MetricUnit.Count, value=1)
    line.flush_metrics()


def metadata(key: str, value: str) -> None:
    """A property on the next EMF line, searchable in the logs, not a dimension."""
    _metrics.add_metadata(key=key, value=value)


def milliseconds(name: str, value: float) -> None:
    _metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)


def flush() -> None:
    if _metrics.metric_set:
        _metrics.flush_metrics()
