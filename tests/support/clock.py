"""Time the tests control: a clock for the TTL caches, and polling for what comes later."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ManualClock:
    """A monotonic clock that moves only when a test advances it (the caches' `clock`)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


def eventually(check: Callable[[], T], timeout: float = 5.0, interval: float = 0.02) -> T:
    """`check()` once it is truthy; AssertionError with its last value after `timeout` seconds.

    For what another thread or process produces in its own time (a log line,
    a flushed metric, a disconnect), never for a TTL: those use ManualClock.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            break
        time.sleep(interval)
    if not value:
        raise AssertionError(f"still {value!r} after {timeout} s")
    return value
