"""What the tests' in-thread gateways hand back: a factory's type and their stdout."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from policy_gateway import names

from .clock import eventually
from .servers import json_lines

GatewayFactory = Callable[..., str]
"""`make_gateway(**settings_overrides) -> url`, the conftest fixture's type."""


class GatewayStdout:
    """What the in-thread gateway writes to stdout: EMF metric lines and JSON log lines.

    Collected in memory rather than through capfd: the gateway thread keeps
    printing after the client has its answer (metrics, the call's log line),
    and a print into a capture that pytest is tearing down can crash the
    interpreter; pytest also swaps sys.stdout between test phases.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def print(self, *values: object, **_: Any) -> None:
        self.write(" ".join(map(str, values)) + "\n")

    @property
    def text(self) -> str:
        with self._lock:
            return "".join(self._parts)

    def lines(self) -> list[dict[str, Any]]:
        """Every line that is a JSON object."""
        return json_lines(self.text)

    def until(self, done: Callable[[str], bool], timeout: float = 15.0) -> str:
        """The output once `done` holds (or the timeout passes: the caller's asserts judge)."""
        with contextlib.suppress(AssertionError):
            eventually(lambda: done(self.text), timeout)
        return self.text

    def call_lines(self, count: int) -> list[dict[str, Any]]:
        """The calls' log lines ("call finished"), once `count` of them were written."""
        self.until(lambda text: text.count('"call finished"') >= count)
        return [line for line in self.lines() if line.get("message") == "call finished"]

    def counted(self, metric: str, **dimensions: str) -> float:
        """The sum of `metric` over the EMF documents whose dimensions are exactly `dimensions`
        (plus service), once at least one was printed."""

        def documents() -> list[dict[str, Any]]:
            found = []
            for line in self.lines():
                emf = line.get("_aws")
                if not emf or metric not in line:
                    continue
                (declared,) = emf["CloudWatchMetrics"]
                (dimension_set,) = declared["Dimensions"]
                wanted = {names.METRICS_SERVICE_DIMENSION, *dimensions}
                if set(dimension_set) == wanted and all(
                    line[k] == v for k, v in dimensions.items()
                ):
                    found.append(line)
            return found

        self.until(lambda _: bool(documents()))
        total = 0.0
        for line in documents():
            value = line[metric]
            total += sum(value) if isinstance(value, list) else value
        return total
