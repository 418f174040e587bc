"""Figure (11): the cost of the retry ladder's check before sending (issue 26).

`fallback.repair.before_sending` runs, in this process, on what a chain made
of a request that needs no repair, the hot path: the scan for a broken rule
and nothing else. A one-message request, and one of about 5 MB in many text
blocks (every block is a candidate the scan looks at).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

from gateway_policies import JSONObject, PolicyContext, load_chain
from policy_gateway.fallback.repair import before_sending

from .harness import Environment
from .report import Figure
from .stats import ms
from .workload import CAP_CHAIN, text_blocks_request

SMALL_RUNS = 2000
LARGE_RUNS = 20
LARGE_MESSAGES = 1000
LARGE_BLOCKS = 10
BLOCK_BYTES = 500


def repair(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    small = text_blocks_request(1, 1, 40)
    large = text_blocks_request(LARGE_MESSAGES, LARGE_BLOCKS, BLOCK_BYTES)
    small_s = asyncio.run(checks(small, SMALL_RUNS))
    large_s = asyncio.run(checks(large, LARGE_RUNS))
    large_bytes = len(json.dumps(large))
    raw["repair_check"] = {"one_message_s": small_s, "large_s": large_s, "large_bytes": large_bytes}
    return [
        Figure(
            "(11) check before sending, one message (p50)",
            ms(statistics.median(small_s)) * 1000,
            "µs",
            "report",
            None,
            f"n={len(small_s)}, in-process",
        ),
        Figure(
            f"(11) check before sending, {large_bytes / 1e6:.1f} MB in text blocks (p50)",
            ms(statistics.median(large_s)),
            "ms",
            "report",
            None,
            f"{LARGE_MESSAGES:,} messages x {LARGE_BLOCKS} text blocks, n={len(large_s)}, "
            "in-process",
        ),
    ]


async def checks(request: JSONObject, runs: int) -> list[float]:
    """Seconds per check of `request` as the chain made it (a cap it is under: no change)."""
    chain = load_chain(CAP_CHAIN)
    ctx = PolicyContext(endpoint="messages", stream=False, call_id="bench")
    await chain.apply_request(request, ctx)
    original = json.dumps(request).encode()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        repairs = await before_sending(original, request, chain, ctx)
        times.append(time.perf_counter() - started)
        if repairs:
            raise RuntimeError(f"a request that needs no repair was repaired: {repairs}")
    return times
