"""Figure (24): the redaction memo's bound is what the gateway's memory grows by, in a soak.

Issue 40's soak, shorter: CALLS calls, CONCURRENCY at a time, of 1 to 300 KB bodies of source
text with a planted AWS key in every text block, each call with an API key of its own (so
one memo partition per call: the most tables, callers' names and entries the memo can be
made to hold), through a gateway with `redact_secrets`, once with POLICY_MEMO_BYTES at its
default and once with the memo off. The gateway's resident memory (the kernel's VmRSS) is
read every SAMPLE calls. What the memo costs is the difference of the two at the end, held
against its bound; its growth over the soak's second half says whether it levelled off.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from policy_gateway import settings

from .harness import HOST, MESSAGES, Environment, free_port, gateway_args, running
from .memory import TEMPLATE_MEMORY_MB, rss_mb
from .report import Figure
from .wire import Connection
from .workload import sources

CALLS = 10_000
CONCURRENCY = 32
SAMPLE = 500
BLOCK_CHARACTERS = 16 * 1024
SMALLEST, LARGEST = 1_000, 300_000
CHAIN = json.dumps({"policies": [{"policy": "redact_secrets"}]})
MB = 1024 * 1024
KEY_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def body(corpus: str, rng: random.Random) -> bytes:
    """One call's request: a random stretch of `corpus` as text blocks, each with a key."""
    size = rng.randint(SMALLEST, LARGEST)
    start = rng.randrange(len(corpus) - size)
    blocks = []
    for at in range(start, start + size, BLOCK_CHARACTERS):
        text = corpus[at : min(at + BLOCK_CHARACTERS, start + size)]
        key = "AKIA" + "".join(rng.choices(KEY_LETTERS, k=16))
        cut = rng.randrange(len(text) + 1)
        blocks.append({"type": "text", "text": f"{text[:cut]} {key} {text[cut:]}"})
    request = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": blocks}],
    }
    return json.dumps(request).encode()


def soak(port: int, pid: int, corpus: str) -> list[float]:
    """CALLS calls, each with an API key of its own; the gateway's RSS (MB) every SAMPLE."""
    local = threading.local()

    def call(number: int) -> int:
        connection: Connection | None = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = Connection(HOST, port)
        payload = body(corpus, random.Random(number))
        headers = {"x-api-key": f"sk-soak-{number:08d}"}
        return connection.post(MESSAGES, payload, headers).status

    samples = []
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        for first in range(0, CALLS, SAMPLE):
            statuses = set(pool.map(call, range(first, first + SAMPLE)))
            if statuses != {200}:
                raise RuntimeError(f"soak calls answered {sorted(statuses)}")
            samples.append(rss_mb(pid)[0])
    return samples


def per_10k(samples: list[float]) -> float:
    """MB of growth per 10,000 calls over the second half of the soak (a least-squares slope)."""
    half = samples[len(samples) // 2 :]
    calls = [SAMPLE * (len(samples) - len(half) + n + 1) for n in range(len(half))]
    return statistics.linear_regression(calls, half).slope * 10_000


def memo_soak(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    corpus = "\n".join(sources())
    bound = settings.DEFAULT_POLICY_MEMO_BYTES
    runs: dict[str, list[float]] = {}
    for label, memo in (("off", 0), ("on", bound)):
        port = free_port()
        extra = {settings.ENV_POLICY_MEMO_BYTES: str(memo)}
        gateway = env.gateway_env(CHAIN, extra=extra)
        with running(gateway_args(port), gateway, f"memo-soak-{label}.log", port) as pid:
            runs[label] = soak(port, pid, corpus)
    held = runs["on"][-1] - runs["off"][-1]
    raw["memo_soak"] = {"calls": CALLS, "bound_bytes": bound, "rss_mb": runs}
    growth = {label: per_10k(samples) for label, samples in runs.items()}
    raw["memo_soak"]["growth_mb_per_10k"] = growth
    return [
        Figure(
            f"(24) memo soak, {CALLS:,} calls of a partition each: what the memo adds to RSS",
            held / (bound / MB),
            "x bound",
            "<= 1.25",
            held <= 1.25 * bound / MB,
            f"RSS at the end {runs['on'][-1]:.0f} MB with the memo at {bound // MB} MiB, "
            f"{runs['off'][-1]:.0f} MB with it off",
        ),
        Figure(
            "(24) the same soak: RSS growth per 10k calls over its second half, memo on",
            growth["on"],
            "MB",
            "report",
            None,
            f"memo off: {growth['off']:.1f} MB; a {TEMPLATE_MEMORY_MB} MB function ended "
            f"at {runs['on'][-1]:.0f} MB",
        ),
    ]
