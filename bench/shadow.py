"""Figure (10): what one shadow policy adds to a call, next to what its copy costs.

Two gateways run the same enforced `cap_max_tokens`; one also runs a
`cap_max_tokens` in shadow mode, a policy whose own work is a comparison and
an assignment, so what it adds is mostly the private copy of the request the
shadow runtime gives it (issue 25: "adds at most the cost of that policy's
copy"). The copy is timed here too, in this process, on the same request
parsed: the runtime's own copy (`gateway_policies.runtime.shadow`, through
JSON text) and, for scale, `copy.deepcopy`.
"""

from __future__ import annotations

import copy
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from gateway_policies.runtime.shadow import _copied

from .harness import HOST, MESSAGES, Environment
from .report import Figure
from .stats import added, ms, paired
from .wire import Connection
from .workload import CAP_CHAIN, CAP_SHADOW_CHAIN, request_body

REQUEST_BYTES = 1024 * 1024
PAIRS = 100
WARMUP = 5
COPIES = 30


def shadow(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    with (
        env.gateway("cap-enforce", CAP_CHAIN) as enforced,
        env.gateway("cap-shadow", CAP_SHADOW_CHAIN) as shadowed,
    ):
        return [shadow_policy(enforced, shadowed, raw)]


def median_seconds(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def shadow_policy(enforced: int, shadowed: int, raw: dict[str, Any]) -> Figure:
    body = request_body(REQUEST_BYTES)
    with_shadow = Connection(HOST, shadowed)
    without = Connection(HOST, enforced)
    shadow_s, enforce_s = paired(
        lambda: with_shadow.post(MESSAGES, body),
        lambda: without.post(MESSAGES, body),
        PAIRS,
        WARMUP,
    )
    request = json.loads(body)
    json_copy = median_seconds(lambda: _copied(request), COPIES)
    deep_copy = median_seconds(lambda: copy.deepcopy(request), COPIES)
    raw["shadow"] = {
        "bytes": len(body),
        "shadow_s": shadow_s,
        "enforce_only_s": enforce_s,
        "copy_s": json_copy,
        "deepcopy_s": deep_copy,
    }
    return Figure(
        "(10) one shadow policy, 1 MB request, added p50",
        added(shadow_s, enforce_s, 50),
        "ms",
        "report",
        None,
        f"its copy in-process {ms(json_copy):.2f} ms (deepcopy {ms(deep_copy):.2f} ms); "
        f"with {ms(statistics.median(shadow_s)):.1f} ms, "
        f"without {ms(statistics.median(enforce_s)):.1f} ms (p50)",
    )
