"""Figures (20) and (21), issue 42: per-caller limits, on one gateway and shared by two.

(20) A caller far below its limits: what the limits add to a 1 KB call (two
gateways, limits off and on, in pairs), and the DynamoDB writes they make per
1,000 calls, counted by a proxy in front of moto. The leases (limits/ledger.py)
make that about one write per lease per window and counter item, not one per call.

(21) Two gateway processes, one table, one caller, `requests_per_minute: 120`:
a burst of 240 calls alternating between them inside one minute. Admitted
must be within 10% of 120 (the documented overshoot bound; a limit below 1,250
has a lease of 0, so the count is exact), the rest refused with 429 and
`retry-after`.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx2
from policy_gateway import settings
from policy_gateway.limits.ledger import LEASE_DIVISOR

from .harness import BUDGET_TABLE, HOST, MESSAGES, Environment
from .report import Figure
from .stats import added, ms, paired
from .wire import BASE_HEADERS, Connection
from .workload import request_body

PAIRS = 300
WARMUP = 20
NO_LIMITS = json.dumps({"policies": []})
# Far above what the bench sends: the caller is always far below them.
FAR_LIMITS = {
    "requests_per_minute": 1_000_000,
    "input_tokens_per_minute": 1_000_000_000,
    "output_tokens_per_minute": 1_000_000_000,
    "spend_per_day_usd": 100_000,
}
SHARED_LIMIT = 120
BURST = 2 * SHARED_LIMIT


class _Forward(BaseHTTPRequestHandler):
    server: CountingProxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.headers.get("x-amz-target", "").endswith(".UpdateItem"):
            with self.server.lock:
                self.server.writes += 1
        target = http.client.HTTPConnection(self.server.target[0], self.server.target[1])
        target.request("POST", self.path, body, dict(self.headers))
        answer = target.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


class CountingProxy(ThreadingHTTPServer):
    """moto's DynamoDB behind a count of the UpdateItem calls made through it."""

    def __init__(self, moto_url: str) -> None:
        super().__init__((HOST, 0), _Forward)
        parts = urlsplit(moto_url)
        self.target = (parts.hostname or HOST, parts.port or 80)
        self.writes = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}"


@contextmanager
def counting(env: Environment) -> Iterator[CountingProxy]:
    proxy = CountingProxy(env.aws["AWS_ENDPOINT_URL_DYNAMODB"])
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


def limits(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    # (21) first: the bench's one caller must start its minute with no requests counted.
    shared_figure = shared(env, raw)
    return [far_below(env, raw), shared_figure]


def far_below(env: Environment, raw: dict[str, Any]) -> Figure:
    limited = json.dumps({"policies": [], "limits": FAR_LIMITS})
    with counting(env) as proxy:
        table = {
            settings.ENV_LIMITS_TABLE: BUDGET_TABLE,
            "AWS_ENDPOINT_URL_DYNAMODB": proxy.url,
        }
        with (
            env.gateway("limits-off", NO_LIMITS) as off,
            env.gateway("limits-on", limited, extra=table) as on,
        ):
            body = request_body(1024)
            with_limits, without = Connection(HOST, on), Connection(HOST, off)
            # Each window's item takes a first write whatever the lease: made before counting.
            for _ in range(WARMUP):
                with_limits.post(MESSAGES, body)
            first_writes = proxy.writes
            started = time.time()
            on_s, off_s = paired(
                lambda: with_limits.post(MESSAGES, body),
                lambda: without.post(MESSAGES, body),
                PAIRS,
                WARMUP,
            )
            calls = PAIRS + WARMUP
            writes = proxy.writes - first_writes
            # A minute that began meanwhile is a new item, with its own first write.
            new_minutes = int(time.time() // 60 - started // 60)
    per_thousand = writes * 1000 / calls
    # The smallest lease in calls: requests are 1 a call; the others are far larger.
    lease_calls = FAR_LIMITS["requests_per_minute"] // LEASE_DIVISOR
    bound = 1000 / lease_calls + new_minutes * 1000 / calls
    value = added(on_s, off_s, 50)
    raw["limits_far_below"] = {
        "on_s": on_s,
        "off_s": off_s,
        "calls": calls,
        "writes": writes,
        "lease_calls": lease_calls,
    }
    return Figure(
        "(20) limits on, caller far below them, 1 KB, added p50",
        value,
        "ms",
        "≤ 0.1 ms, writes ≤ 1,000 / lease",
        value <= 0.1 and per_thousand <= bound,
        f"{writes} DynamoDB writes in {calls} calls = {per_thousand:.1f} per 1,000 "
        f"(bound {bound:.1f}: 1,000 / lease of {lease_calls} calls, plus {new_minutes} new "
        f"minute item(s)), after {first_writes} first writes of the windows' items; "
        f"on {ms(sorted(on_s)[len(on_s) // 2]):.2f} ms, "
        f"off {ms(sorted(off_s)[len(off_s) // 2]):.2f} ms (p50)",
    )


def shared(env: Environment, raw: dict[str, Any]) -> Figure:
    policy = json.dumps({"policies": [], "limits": {"requests_per_minute": SHARED_LIMIT}})
    table = {settings.ENV_LIMITS_TABLE: BUDGET_TABLE}
    with (
        env.gateway("limits-first", policy, extra=table) as first,
        env.gateway("limits-second", policy, extra=table) as second,
    ):
        connections = [Connection(HOST, first), Connection(HOST, second)]
        body = request_body(1024)
        # The burst fits in one minute window: it starts early in a minute.
        if time.time() % 60 > 40:
            time.sleep(60 - time.time() % 60 + 0.5)
        statuses = [connections[n % 2].post(MESSAGES, body).status for n in range(BURST)]
        refusal = httpx2.post(
            f"http://{HOST}:{first}{MESSAGES}", content=body, headers=BASE_HEADERS
        )
    admitted = statuses.count(200)
    refused = statuses.count(429)
    within = abs(admitted - SHARED_LIMIT) <= SHARED_LIMIT * 0.1
    retry_after = refusal.headers.get("retry-after")
    raw["limits_shared"] = {"admitted": admitted, "refused": refused, "statuses": statuses}
    return Figure(
        f"(21) two gateways share one caller's {SHARED_LIMIT}/minute: admitted",
        admitted,
        "calls",
        f"{SHARED_LIMIT} ± 10%, the rest 429 with retry-after",
        within and admitted + refused == BURST and refusal.status_code == 429 and bool(retry_after),
        f"{refused} refused of {BURST}; a later call: {refusal.status_code}, "
        f"retry-after {retry_after}",
    )
