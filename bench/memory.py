"""Figure (6): a gateway's resident memory while it relays many streams at once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from .harness import HOST, MESSAGES, Environment, free_port, gateway_args, running
from .report import Figure
from .wire import Connection, stream_to_end
from .workload import NOOP_CHAIN, request_body

STREAMS = 200
STREAM_EVENTS = 50
STREAM_INTERVAL_MS = 40


def rss_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident set size of `pid` in MB, from the kernel's own counters."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def memory(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    port = free_port()
    body = request_body(1024, stream=True)
    headers = {"x-bench-events": str(STREAM_EVENTS), "x-bench-interval-ms": str(STREAM_INTERVAL_MS)}
    with running(gateway_args(port), env.gateway_env(NOOP_CHAIN), "memory.log", port) as pid:
        Connection(HOST, port).post(MESSAGES, body, {"x-bench-events": "5"})
        idle, _ = rss_mb(pid)

        async def all_streams() -> list[int]:
            return await asyncio.gather(
                *(stream_to_end(HOST, port, MESSAGES, body, headers) for _ in range(STREAMS))
            )

        started = time.perf_counter()
        asyncio.run(all_streams())
        seconds = time.perf_counter() - started
        _, peak = rss_mb(pid)
    raw["memory"] = {"idle_mb": idle, "peak_mb": peak, "streams": STREAMS, "seconds": seconds}
    return [
        Figure(
            f"(6) peak RSS, {STREAMS} concurrent streams",
            peak,
            "MB",
            "< 150",
            peak < 150,
            f"idle {idle:.0f} MB; streams took {seconds:.1f} s",
        )
    ]
