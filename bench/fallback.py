"""Figures (3), (4) and (7, budget check): what the passthrough fallback costs.

Three gateways run the `string_replace` chain: the flag off, the flag on, and
the flag on with the fallback budget counted in DynamoDB (moto) instead of in
the process. The stub rejects a request that carries the rewritten text when
asked to (x-bench-reject), which is what makes a call fall back.
"""

from __future__ import annotations

import statistics
from typing import Any

from .harness import BUDGET_TABLE, FLAG_OFF, FLAG_ON, HOST, MESSAGES, Environment
from .report import Figure
from .stats import added, ms, pair_ratio, paired
from .wire import Connection
from .workload import REPLACE_CHAIN, REWRITTEN, request_body

LARGE_BYTES = 4 * 1024 * 1024
LARGE_PAIRS = 40
FALLBACK_PAIRS = 300
FALLBACK_WARMUP = 20
REJECT = {"x-bench-reject": REWRITTEN}


def fallback(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    with (
        env.gateway("flag-on", REPLACE_CHAIN, FLAG_ON) as on,
        env.gateway("flag-off", REPLACE_CHAIN, FLAG_OFF) as off,
        env.gateway("flag-on-shared-budget", REPLACE_CHAIN, FLAG_ON, BUDGET_TABLE) as shared,
    ):
        return [armed(on, off, raw), full_fallback(on, raw), budget_check(on, shared, raw)]


def armed(on: int, off: int, raw: dict[str, Any]) -> Figure:
    """A large request with the fallback armed (the original kept) and not."""
    body = request_body(LARGE_BYTES)
    armed = Connection(HOST, on)
    disarmed = Connection(HOST, off)
    on_s, off_s = paired(
        lambda: armed.post(MESSAGES, body),
        lambda: disarmed.post(MESSAGES, body),
        LARGE_PAIRS,
        warmup=3,
    )
    raw["armed"] = {"bytes": len(body), "flag_on_s": on_s, "flag_off_s": off_s}
    ratio = pair_ratio(on_s, off_s)
    return Figure(
        "(3) 4 MB request, flag on / off (p50 of pairs)",
        ratio,
        "x",
        "<= 1.05",
        ratio <= 1.05,
        f"on {ms(statistics.median(on_s)):.1f} ms, off {ms(statistics.median(off_s)):.1f} ms",
    )


def full_fallback(on: int, raw: dict[str, Any]) -> Figure:
    body = request_body(1024)
    through = Connection(HOST, on)
    fell_back, plain = paired(
        lambda: through.post(MESSAGES, body, REJECT),
        lambda: through.post(MESSAGES, body),
        FALLBACK_PAIRS,
        FALLBACK_WARMUP,
    )
    raw["fallback"] = {"fallback_s": fell_back, "plain_s": plain}
    ratio = pair_ratio(fell_back, plain)
    return Figure(
        "(4) full fallback (400, retry) / plain",
        ratio,
        "x",
        "report",
        None,
        f"fallback {ms(statistics.median(fell_back)):.2f} ms, "
        f"plain {ms(statistics.median(plain)):.2f} ms (p50)",
    )


def budget_check(on: int, on_shared: int, raw: dict[str, Any]) -> Figure:
    """What counting a fallback in DynamoDB (a local moto) adds over counting it in the process."""
    body = request_body(1024)
    in_table = Connection(HOST, on_shared)
    in_process = Connection(HOST, on)
    shared, local = paired(
        lambda: in_table.post(MESSAGES, body, REJECT),
        lambda: in_process.post(MESSAGES, body, REJECT),
        FALLBACK_PAIRS,
        FALLBACK_WARMUP,
    )
    raw["budget_check"] = {"dynamodb_s": shared, "in_process_s": local}
    return Figure(
        "(7) fallback budget check, DynamoDB (local moto) vs in-process, added p50",
        added(shared, local, 50),
        "ms",
        "report",
        None,
        f"fallback {ms(statistics.median(shared)):.2f} ms with the table, "
        f"{ms(statistics.median(local)):.2f} ms in-process (p50)",
    )
