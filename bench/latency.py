"""Figures (1), (2), (2b) and (7, batch results): what relaying through the gateway adds.

Each compares the gateway with the upstream stub called directly (or the
Bedrock path with the Anthropic one), in back-to-back pairs.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from .harness import HOST, MESSAGES, Environment
from .report import Figure
from .stats import Call, added, ms, paired, percentile
from .wire import Connection, Response
from .workload import BLOCK_CHAIN, NOOP_CHAIN, request_body

LATENCY_PAIRS = 2000
WARMUP = 200
TTFE_PAIRS = 500
THROUGHPUT_EVENTS = 5000
THROUGHPUT_RUNS = 10
RESULT_LINES = 10_000
RESULT_RUNS = 5


def relay(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    """(1), (2) and (2b) through one gateway with the `noop` chain (and a Bedrock one)."""
    with env.gateway("noop", NOOP_CHAIN) as noop:
        figures = added_latency(env, noop, raw)
        figures += streaming(env, noop, raw)
        with env.gateway("bedrock", NOOP_CHAIN, bedrock=True) as bedrock:
            figures.append(bedrock_stream(noop, bedrock, raw))
    return figures


def results(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    """(7) batch results through a gateway with the `block_tool_calls` chain."""
    with env.gateway("results", BLOCK_CHAIN) as gateway:
        return [results_stream(env, gateway, raw)]


def added_latency(env: Environment, gateway: int, raw: dict[str, Any]) -> list[Figure]:
    body = request_body(1024)
    direct = Connection(HOST, env.upstream_port)
    through = Connection(HOST, gateway)
    gw, dr = paired(
        lambda: through.post(MESSAGES, body),
        lambda: direct.post(MESSAGES, body),
        LATENCY_PAIRS,
        WARMUP,
    )
    raw["latency"] = {"bytes": len(body), "gateway_s": gw, "direct_s": dr}
    p50, p99 = added(gw, dr, 50), added(gw, dr, 99)
    detail = (
        f"gateway {ms(percentile(gw, 50)):.2f} / {ms(percentile(gw, 99)):.2f} ms, "
        f"direct {ms(percentile(dr, 50)):.2f} / {ms(percentile(dr, 99)):.2f} ms (p50 / p99)"
    )
    return [
        Figure("(1) added latency p50, 1 KB, noop", p50, "ms", "<= 1.5", p50 <= 1.5, detail),
        Figure(
            "(1) added latency p99, 1 KB, noop", p99, "ms", "<= 5", p99 <= 5, f"n={len(gw)} pairs"
        ),
    ]


def first_event(call: Call) -> Call:
    """`call`, timed to its first SSE event instead of its end."""

    def timed() -> Response:
        response = call()
        assert response.first_event_seconds is not None, "stream without an event"
        response.seconds = response.first_event_seconds
        return response

    return timed


def whole_stream(connection: Connection, body: bytes, headers: dict[str, str]) -> Call:
    """One streaming call that must deliver every one of the THROUGHPUT_EVENTS events."""

    def call() -> Response:
        response = connection.post(MESSAGES, body, headers)
        if response.events != THROUGHPUT_EVENTS:
            raise RuntimeError(f"{response.events} of {THROUGHPUT_EVENTS} events arrived")
        return response

    return call


def streaming(env: Environment, gateway: int, raw: dict[str, Any]) -> list[Figure]:
    body = request_body(1024, stream=True)
    direct = Connection(HOST, env.upstream_port)
    through = Connection(HOST, gateway)
    short = {"x-bench-events": "10"}
    gw, dr = paired(
        first_event(lambda: through.post(MESSAGES, body, short)),
        first_event(lambda: direct.post(MESSAGES, body, short)),
        TTFE_PAIRS,
        warmup=50,
    )
    long = {"x-bench-events": str(THROUGHPUT_EVENTS)}
    gw_stream, dr_stream = paired(
        whole_stream(through, body, long),
        whole_stream(direct, body, long),
        THROUGHPUT_RUNS,
        warmup=2,
    )
    raw["ttfe"] = {"gateway_s": gw, "direct_s": dr}
    raw["stream"] = {"events": THROUGHPUT_EVENTS, "gateway_s": gw_stream, "direct_s": dr_stream}
    ttfe = added(gw, dr, 50)
    rate = THROUGHPUT_EVENTS / statistics.median(gw_stream)
    direct_rate = THROUGHPUT_EVENTS / statistics.median(dr_stream)
    return [
        Figure(
            "(2) added time to first event p50",
            ttfe,
            "ms",
            "<= 1.5",
            ttfe <= 1.5,
            f"gateway {ms(percentile(gw, 50)):.2f} ms, direct {ms(percentile(dr, 50)):.2f} ms",
        ),
        Figure(
            f"(2) relay throughput, {THROUGHPUT_EVENTS}-event stream",
            rate,
            "events/s",
            ">= 20000",
            rate >= 20000,
            f"direct {direct_rate:,.0f} events/s",
        ),
    ]


def bedrock_stream(anthropic: int, bedrock: int, raw: dict[str, Any]) -> Figure:
    """Relay throughput with Bedrock's event stream decoded to SSE, against the SSE relay.

    Both gateways take the same stub's stream of the same events, paired back
    to back; the Bedrock one also checks two CRCs per message and decodes the
    base64 event inside it.
    """
    body = json.loads(request_body(1024, stream=True))
    body["model"] = f"anthropic.bench-{THROUGHPUT_EVENTS}"
    payload = json.dumps(body).encode()
    headers = {"x-bench-events": str(THROUGHPUT_EVENTS)}
    via_bedrock, via_anthropic = paired(
        whole_stream(Connection(HOST, bedrock), payload, headers),
        whole_stream(Connection(HOST, anthropic), payload, headers),
        THROUGHPUT_RUNS,
        warmup=2,
    )
    raw["bedrock_stream"] = {
        "events": THROUGHPUT_EVENTS,
        "bedrock_s": via_bedrock,
        "anthropic_s": via_anthropic,
    }
    rate = THROUGHPUT_EVENTS / statistics.median(via_bedrock)
    anthropic_rate = THROUGHPUT_EVENTS / statistics.median(via_anthropic)
    share = rate / anthropic_rate
    return Figure(
        f"(2b) Bedrock relay throughput, {THROUGHPUT_EVENTS}-event stream",
        rate,
        "events/s",
        ">= 0.5x Anthropic path",
        share >= 0.5,
        f"Anthropic path {anthropic_rate:,.0f} events/s; {share:.2f}x",
    )


def results_stream(env: Environment, gateway: int, raw: dict[str, Any]) -> Figure:
    """Batch results through block_tool_calls (every line parsed, judged, re-serialized)."""
    path = "/v1/messages/batches/msgbatch_bench/results"
    headers = {"x-bench-lines": str(RESULT_LINES)}
    direct = Connection(HOST, env.upstream_port)
    through = Connection(HOST, gateway)

    def fetch(connection: Connection) -> Call:
        def call() -> Response:
            response = connection.get(path, headers)
            arrived = response.body.count(b"\n")
            if arrived != RESULT_LINES:
                raise RuntimeError(f"{arrived} of {RESULT_LINES} lines arrived")
            return response

        return call

    gw, dr = paired(fetch(through), fetch(direct), RESULT_RUNS, warmup=1)
    blocked = through.get(path, headers).body.count(b"block_tool_calls blocked")
    if blocked != RESULT_LINES // 10:
        raise RuntimeError(f"{blocked} tool calls blocked, expected {RESULT_LINES // 10}")
    raw["results"] = {"lines": RESULT_LINES, "gateway_s": gw, "direct_s": dr}
    rate = RESULT_LINES / statistics.median(gw)
    return Figure(
        f"(7) batch results, {RESULT_LINES:,} lines, block_tool_calls",
        rate,
        "lines/s",
        "report",
        None,
        f"direct {RESULT_LINES / statistics.median(dr):,.0f} lines/s",
    )
