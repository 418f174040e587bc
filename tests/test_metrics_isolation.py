"""Tests do not share EMF: the metrics buffer is emptied around each test, and EMF
documents never reach pytest's captured output (tests/conftest.py)."""

from __future__ import annotations

import pytest
from aws_lambda_powertools import Metrics
from policy_gateway.observability import metrics

pytestmark = pytest.mark.unit

LEFT_BEHIND = "LeftBehindByAnEarlierTest"


def _buffered() -> dict[str, object]:
    # Powertools' class-level store, shared by every Metrics instance of the process.
    return dict(Metrics(namespace="any").metric_set)


def test_a_test_may_leave_a_metric_unflushed() -> None:
    metrics.count(LEFT_BEHIND)
    assert LEFT_BEHIND in _buffered()


def test_the_next_test_starts_without_it() -> None:
    """Runs after the one above (file order): the metric it left was discarded."""
    assert _buffered() == {}


def test_a_flush_prints_nothing_into_the_captured_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    metrics.count(LEFT_BEHIND)
    metrics.count_by(LEFT_BEHIND, {"policy": "noop"})
    metrics.flush()
    captured = capsys.readouterr()
    assert "_aws" not in captured.out + captured.err
