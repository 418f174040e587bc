"""Figure (6): a gateway's resident memory while it relays many streams at once, and (6b) the
CPU one busy stream takes, against the share of a vCPU the template's MemorySize buys."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from .harness import HOST, MESSAGES, Environment, free_port, gateway_args, running
from .report import Figure
from .wire import Connection, stream_to_end
from .workload import NOOP_CHAIN, REPLACE_CHAIN, request_body

STREAMS = 200
STREAM_EVENTS = 50
STREAM_INTERVAL_MS = 40
# A fast model's stream: 100 events a second, through a chain that edits the stream.
BUSY_EVENTS = 800
BUSY_INTERVAL_MS = 10
# Lambda gives a function one vCPU at 1769 MB, in proportion below that.
MB_PER_VCPU = 1769
TEMPLATE_MEMORY_MB = 512


def cpu_seconds(pid: int) -> float:
    """User and system CPU time `pid` has used (the kernel's utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    busy = busy_stream(env)
    raw["busy_stream_cpu_share"] = busy
    share = TEMPLATE_MEMORY_MB / MB_PER_VCPU
    return [
        Figure(
            "(6b) CPU of one busy stream (100 events/s)",
            busy * 100,
            "% vCPU",
            "report",
            None,
            f"{TEMPLATE_MEMORY_MB} MB buys {share:.0%} of a vCPU: {share / busy:.1f}x this need",
        ),
        Figure(
            f"(6) peak RSS, {STREAMS} concurrent streams",
            peak,
            "MB",
            "< 150",
            peak < 150,
            f"idle {idle:.0f} MB; streams took {seconds:.1f} s",
        ),
    ]


def busy_stream(env: Environment) -> float:
    """The share of one CPU the gateway spends relaying one fast stream, start to end."""
    port = free_port()
    body = request_body(1024, stream=True)
    headers = {"x-bench-events": str(BUSY_EVENTS), "x-bench-interval-ms": str(BUSY_INTERVAL_MS)}
    with running(gateway_args(port), env.gateway_env(REPLACE_CHAIN), "busy.log", port) as pid:
        Connection(HOST, port).post(MESSAGES, body, {"x-bench-events": "5"})
        before, started = cpu_seconds(pid), time.perf_counter()
        Connection(HOST, port).post(MESSAGES, body, headers)
        return (cpu_seconds(pid) - before) / (time.perf_counter() - started)
