"""`make bench`: Policy Gateway side by side with direct access, in one run.

    python -m bench.run [--only GROUP ...]

Every figure is a difference or a ratio from the same run: the gateway against
the upstream stub called directly, or one gateway against another, in pairs
(stats.py). The harness (harness.py) starts the stub, moto and each gateway as
child processes on loopback; each group of figures (FIGURES below) lives in its
own module and starts the gateways it measures. The report (report.py) prints
the table, writes the raw figures to bench/results/latest.json and the chart to
bench/results/latency.png.

Exits 1 when a figure misses its target; figures reported for information
(target "report", and (8)'s goal, issue 13) never fail the run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from . import (
    detect,
    fallback,
    flow,
    judge,
    judge_wiring,
    latency,
    limits,
    memo_soak,
    memory,
    propagation,
    records,
    repair,
    restore,
    shadow,
    startup,
)
from .harness import RESULTS, Environment
from .report import Figure, machine, write

Group = Callable[[Environment, dict[str, Any]], list[Figure]]

# In the order they run and print; README.md and docs/performance.md number them.
FIGURES: tuple[tuple[str, Group], ...] = (
    ("cold-start", startup.development),  # (5)
    ("artifact", startup.artifact),  # (8), runs `sam build`
    ("restore", restore.restore),  # (9) SnapStart's restore path
    ("relay", latency.relay),  # (1), (2), (2b)
    ("results", latency.results),  # (7) batch results
    ("fallback", fallback.fallback),  # (3), (4), (7) budget check
    ("memory", memory.memory),  # (6)
    ("memo-soak", memo_soak.memo_soak),  # (24) issue 40, the memo's bound in RSS
    ("shadow", shadow.shadow),  # (10) issue 25
    ("repair", repair.repair),  # (11) issue 26, in-process
    ("flow", flow.flow),  # (15) issue 33, in-process
    ("propagation", propagation.propagation),  # (16) issue 34
    ("judge", judge.judge),  # (17), (18) issue 41, in-process
    ("judge-eval", judge_wiring.wiring),  # (19) issue 41, in-process against the simulator
    ("detect", detect.detect),  # (12), (13), (14) issue 32, agent traffic
    ("limits", limits.limits),  # (20), (21) issue 42
    ("records", records.records),  # (22), (23) issue 43
)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only",
        nargs="+",
        choices=[name for name, _ in FIGURES],
        metavar="GROUP",
        help=f"run only these groups of figures: {', '.join(name for name, _ in FIGURES)}",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    only = arguments(argv).only
    RESULTS.mkdir(exist_ok=True)
    started = time.perf_counter()
    raw: dict[str, Any] = {"machine": machine()}
    figures: list[Figure] = []
    with ExitStack() as stack:
        env = Environment(stack)
        for name, measure in FIGURES:
            if only is None or name in only:
                figures += measure(env, raw)
    write(raw, figures, time.perf_counter() - started, RESULTS)
    return 0 if all(figure.passed is not False for figure in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
