"""Figure (11): the cost of the retry ladder's check before sending (issues 26 and 31).

`fallback.repair.before_sending` runs, in this process, on what a chain made
of a request that needs no repair, the hot path: the scan for a broken rule
and nothing else. A one-message request, and one of about 5 MB in many text
blocks (every block is a candidate the scan looks at).

The worst case (issue 31): a 6 MB body of text blocks a policy empties, every
one repaired away. The CPU of the gateway's whole request path for it (parse,
policies, the check, the repairs and their attribution, serialization), and,
as in `serve` where calls share the worker loop their request hooks run on,
how much longer a small call takes when it arrives while that body is under way.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

from gateway_policies import JSONObject, PolicyChain, PolicyContext, load_chain
from policy_gateway import offload
from policy_gateway.fallback.repair import before_sending
from policy_gateway.routes.messages import _prepare

from .harness import Environment
from .report import Figure
from .stats import ms
from .workload import CAP_CHAIN, EMPTIED, EMPTYING_CHAIN, emptied_blocks_body, text_blocks_request

SMALL_RUNS = 2000
LARGE_RUNS = 20
LARGE_MESSAGES = 1000
LARGE_BLOCKS = 10
BLOCK_BYTES = 500
EMPTIED_BYTES = 6_000_000
EMPTIED_RUNS = 3
BESIDE_RUNS = 5
SMALL_ALONE_RUNS = 50
HEAD_START = 0.05
"""How long the large body's call runs before the small call arrives."""


def repair(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    small = text_blocks_request(1, 1, 40)
    large = text_blocks_request(LARGE_MESSAGES, LARGE_BLOCKS, BLOCK_BYTES)
    small_s = asyncio.run(checks(small, SMALL_RUNS))
    large_s = asyncio.run(checks(large, LARGE_RUNS))
    large_bytes = len(json.dumps(large))
    raw["repair_check"] = {"one_message_s": small_s, "large_s": large_s, "large_bytes": large_bytes}
    return [*check_figures(small_s, large_s, large_bytes), *emptied_figures(raw)]


def check_figures(small_s: list[float], large_s: list[float], large_bytes: int) -> list[Figure]:
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


def emptied_figures(raw: dict[str, Any]) -> list[Figure]:
    body = emptied_blocks_body(EMPTIED_BYTES)
    chain = load_chain(EMPTYING_CHAIN)
    cpu_s = [asyncio.run(request_path_cpu(body, chain)) for _ in range(EMPTIED_RUNS)]
    alone_s, beside_s = asyncio.run(small_beside(body, chain))
    added_s = [beside - statistics.median(alone_s) for beside in beside_s]
    raw["repair_emptied"] = {
        "bytes": len(body),
        "cpu_s": cpu_s,
        "small_alone_s": alone_s,
        "small_beside_s": beside_s,
    }
    return [
        Figure(
            f"(11) request path CPU, {len(body) / 1e6:.1f} MB of emptied blocks (median)",
            ms(statistics.median(cpu_s)),
            "ms",
            "< 1000 ms",
            statistics.median(cpu_s) < 1.0,
            f"parse to serialization, {body.count(EMPTIED.encode()):,} blocks repaired, "
            f"n={len(cpu_s)}, in-process",
        ),
        Figure(
            "(11) small call beside it, added latency (median)",
            ms(statistics.median(added_s)),
            "ms",
            "report",
            None,
            f"max {ms(max(added_s)):.1f} ms; alone p50 {ms(statistics.median(alone_s)):.2f} ms; "
            f"n={len(added_s)}, one worker loop as in serve",
        ),
    ]


def _context() -> PolicyContext:
    return PolicyContext(endpoint="messages", stream=False, call_id="bench")


async def request_path_cpu(body: bytes, chain: PolicyChain) -> float:
    """CPU seconds of the request path for `body`: parse, policies, check, repairs, serialize."""
    started = time.process_time()
    prepared = await _prepare(body, chain, _context())
    cpu = time.process_time() - started
    if EMPTIED.encode() in prepared.sent:
        raise RuntimeError("the emptied blocks were sent")
    return cpu


async def small_beside(body: bytes, chain: PolicyChain) -> tuple[list[float], list[float]]:
    """Seconds a one-message call's request path takes on the worker loop, alone and while
    `body`'s runs there (it arrives HEAD_START into it)."""
    small = json.dumps(text_blocks_request(1, 1, 40)).encode()

    async def timed() -> float:
        started = time.perf_counter()
        await offload.run(_prepare(small, chain, _context()))
        return time.perf_counter() - started

    alone = [await timed() for _ in range(SMALL_ALONE_RUNS)]
    beside = []
    for _ in range(BESIDE_RUNS):
        large = asyncio.ensure_future(offload.run(_prepare(body, chain, _context())))
        await asyncio.sleep(HEAD_START)
        beside.append(await timed())
        if large.done():
            raise RuntimeError("the large call ended before the small one arrived")
        await large
    return alone, beside
