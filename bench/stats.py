"""How the bench samples and summarizes: calls in back-to-back pairs, figures of the pairs.

Every figure compares two sides of one run (gateway and direct, flag on and
off, ...). Each pair runs back to back, alternating which side goes first, so
load from elsewhere on the machine (other processes come and go on a shared
2-core box) mostly hits both sides of a pair alike and cancels out within it.
A figure with more sides (a gateway, a floor and direct) takes rounds of one
call each, in an order drawn anew each round.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping

from .wire import Response

Call = Callable[[], Response]


def paired(first: Call, second: Call, pairs: int, warmup: int) -> tuple[list[float], list[float]]:
    """Time `pairs` calls of each, alternating which goes first; seconds, after a warm-up."""
    times = rounds({"first": first, "second": second}, pairs, warmup)
    return times["first"], times["second"]


def rounds(calls: Mapping[str, Call], count: int, warmup: int) -> dict[str, list[float]]:
    """Time `count` rounds of one call of each; seconds per call, by name, after a warm-up.

    Two sides alternate which goes first. More sides go in an order drawn anew each round
    (seeded, so two runs draw alike): turning one fixed order would put each call always
    after the same other one, and what that one leaves running (a gateway's log line after
    its answer) would weigh on it alone.
    """
    names = list(calls)
    draw = random.Random(len(names))
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(warmup + count):
        if len(names) == 2:
            order = names[index % 2 :] + names[: index % 2]
        else:
            order = draw.sample(names, len(names))
        for name in order:
            response = calls[name]()
            if response.status != 200:
                raise RuntimeError(f"benchmark call answered {response.status}: {response.body!r}")
            if index >= warmup:
                times[name].append(response.seconds)
    return times


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ms(seconds: float) -> float:
    return seconds * 1000


def added(gateway: list[float], direct: list[float], q: float) -> float:
    """Percentile `q` of the per-pair differences, in ms.

    A difference of two percentiles would not cancel the drift a pair shares.
    """
    return ms(percentile([g - d for g, d in zip(gateway, direct, strict=True)], q))


def pair_ratio(first: list[float], second: list[float]) -> float:
    """Median of the per-pair ratios."""
    return statistics.median(a / b for a, b in zip(first, second, strict=True))
