"""The upstream retry policy's pure parts, alone: which answers are retried, and how long
the gateway waits (the SDK's backoff, `retry-after-ms` / `retry-after` honoured)."""

from __future__ import annotations

import email.utils
import time

import httpx2
import pytest
from policy_gateway.upstream.retry import (
    INITIAL_RETRY_DELAY,
    MAX_RETRY_AFTER,
    MAX_RETRY_DELAY,
    retry_delay,
    should_retry,
)

pytestmark = pytest.mark.unit


def retried(status: int, **headers: str) -> bool:
    return should_retry(status, httpx2.Headers(headers))


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_retried_statuses(status: int) -> None:
    assert retried(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_not_retried_statuses(status: int) -> None:
    assert not retried(status)


def test_x_should_retry_overrides_the_status() -> None:
    assert retried(400, **{"x-should-retry": "true"})
    assert not retried(529, **{"x-should-retry": "false"})
    assert retried(529, **{"x-should-retry": "maybe"})


@pytest.mark.parametrize("retry", [0, 1, 2, 3, 10])
def test_backoff_doubles_up_to_its_cap_with_up_to_a_quarter_of_jitter(retry: int) -> None:
    ceiling = min(INITIAL_RETRY_DELAY * 2.0**retry, MAX_RETRY_DELAY)
    delays = [retry_delay(retry, None) for _ in range(200)]
    assert all(0.75 * ceiling <= delay <= ceiling for delay in delays)
    assert len(set(delays)) > 1


def delay(**headers: str) -> float:
    return retry_delay(0, httpx2.Headers(headers))


def test_retry_after_in_seconds_and_milliseconds() -> None:
    assert delay(**{"retry-after": "3"}) == 3.0
    assert delay(**{"retry-after": "1.5"}) == 1.5
    assert delay(**{"retry-after-ms": "250"}) == 0.25


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert delay(**{"retry-after-ms": "100", "retry-after": "9"}) == pytest.approx(0.1)


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 <= delay(**{"retry-after": when}) <= 30


def test_retry_after_up_to_the_sdks_limit_is_honoured() -> None:
    assert delay(**{"retry-after": str(MAX_RETRY_AFTER)}) == MAX_RETRY_AFTER


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "soon"},
        {"retry-after": "0"},
        {"retry-after": "-5"},
        # Beyond the SDK's range: ignored, never shortened to the limit and slept.
        {"retry-after": "3600"},
        {"retry-after-ms": "Tue, 01 Dec 2026 00:00:00 GMT"},
        {"retry-after": email.utils.formatdate(time.time() - 60, usegmt=True)},
    ],
)
def test_unusable_retry_after_falls_back_to_the_backoff(headers: dict[str, str]) -> None:
    assert 0.75 * INITIAL_RETRY_DELAY <= delay(**headers) <= INITIAL_RETRY_DELAY
