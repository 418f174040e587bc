"""CloudWatch metrics in Embedded Metric Format (Powertools Metrics) on stdout.

Most metrics carry exactly the dimension set [service], which is what the
template's alarms name. There is no Lambda handler under the Web Adapter, so
the gateway flushes after every call (for a stream, in its `finally`).

A few are counted by more than the service (`count_by`): PolicyActions by
policy and action, tokens by model, PolicyRepairs and the Judge* metrics by policy
(JudgeLatency with `milliseconds_by`). Powertools keeps one dimension set per
document, so each distinct set of values becomes an EMF document of its own
at the flush; a call that counted none writes nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from .. import names, settings

_metrics = Metrics(namespace=settings.metrics_namespace(), service=settings.service_name())

Dimensions = tuple[tuple[str, str], ...]
# Counts by their extra dimensions, until the flush: {dimensions: {metric: total}}.
_by_dimensions: dict[Dimensions, dict[str, float]] = {}
# Timings by their extra dimensions, until the flush: {dimensions: {metric: [ms, ...]}}.
_timed_by_dimensions: dict[Dimensions, dict[str, list[float]]] = {}
_models: set[str] = set()


def count(name: str, value: float = 1) -> None:
    _metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def metadata(key: str, value: str) -> None:
    """A property on the next EMF line, searchable in the logs, not a dimension."""
    _metrics.add_metadata(key=key, value=value)


def milliseconds(name: str, value: float) -> None:
    _metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)


def seconds(name: str, value: float) -> None:
    _metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=value)


def count_by(name: str, dimensions: Mapping[str, str], value: float = 1) -> None:
    """Count `name` under the dimension set [service, *dimensions] (in the given order)."""
    metrics = _by_dimensions.setdefault(tuple(dimensions.items()), {})
    metrics[name] = metrics.get(name, 0) + value


def milliseconds_by(name: str, dimensions: Mapping[str, str], value: float) -> None:
    """One timing of `name` (Milliseconds) under [service, *dimensions]; each is kept, so
    CloudWatch's percentiles see every one."""
    _timed_by_dimensions.setdefault(tuple(dimensions.items()), {}).setdefault(name, []).append(
        value
    )


def model_dimension(model: str) -> str:
    """`model` as a dimension value: itself while fewer than MAX_MODEL_DIMENSIONS distinct
    models were counted in this process, else `other`."""
    if model in _models:
        return model
    if len(_models) < names.MAX_MODEL_DIMENSIONS:
        _models.add(model)
        return model
    return names.MODEL_OTHER


def flush() -> None:
    if _metrics.metric_set:
        _metrics.flush_metrics()
    for dimensions in {*_by_dimensions, *_timed_by_dimensions}:
        counted = _by_dimensions.pop(dimensions, {})
        timed = _timed_by_dimensions.pop(dimensions, {})
        service = settings.service_name()
        document = EphemeralMetrics(namespace=settings.metrics_namespace(), service=service)
        document.add_dimension(name=names.METRICS_SERVICE_DIMENSION, value=service)
        for key, dimension in dimensions:
            document.add_dimension(name=key, value=dimension)
        for name, total in counted.items():
            document.add_metric(name=name, unit=MetricUnit.Count, value=total)
        for name, values in timed.items():
            for value in values:
                document.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)
        document.flush_metrics()


def discard() -> None:
    """Drop what is buffered unflushed: after a restore it belongs to the snapshot's process."""
    _metrics.clear_metrics()
    _by_dimensions.clear()
    _timed_by_dimensions.clear()
