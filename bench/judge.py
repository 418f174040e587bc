"""Figures (17) and (18): what judging adds to a streamed answer, and its bound under attack.

In-process, on the real chain and `rules_judge`, with a judge service on
loopback that answers every judge call with an `allow` verdict after a fixed
latency L (the simulator's role in a local run, with a known delay). The
upstream's events are fed at the times a streaming upstream would send them.

(17) An answer of 3 text and 3 tool_use blocks streamed over 3 s (an event
about every 10 ms, as a model streams tokens), judged both ways (`judge:
["tool_use", "text"]`): the time the first text byte reaches the client
beyond the upstream's in `stream` mode, and beyond the end of its block (when
its judge starts) in `hold` mode; the time the answer ends beyond the upstream's end (pipelined
judges: about L, not 6 L), timed from the upstream's last event to the
client's; the judge calls (6), and again when the same
answer is replayed (0: the memo).
(18) A hostile answer of 1,000 tool_use blocks: the judge calls made (at most
`max_judged_blocks`) and how long after the upstream's end the answer was
handled.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from gateway_policies import PolicyContext, StreamEvent, load_chain
from gateway_policies.testing import stream, text_block, tool_use_block
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .harness import free_port
from .report import Figure

JUDGE_LATENCY_S = 0.3
EVENT_GAP_S = 0.01
ANSWER_S = 3.0
HOSTILE_BLOCKS = 1000
MAX_JUDGED = 32
HOSTILE_GAP_S = 0.001
"""The hostile upstream sends an event each millisecond (about 5 s for its 1,000 blocks)."""


class _Judge:
    """Answers every judge call with `allow` after JUDGE_LATENCY_S; counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    async def _messages(self, request: Request) -> Response:
        await request.body()
        self.calls += 1
        await asyncio.sleep(JUDGE_LATENCY_S)
        verdict = {"decision": "allow", "reason": "fine"}
        return JSONResponse(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "verdict", "input": verdict}],
                "usage": {"input_tokens": 50, "output_tokens": 10},
            }
        )


@contextmanager
def _judge_service() -> Iterator[tuple[_Judge, str]]:
    judge, port = _Judge(), free_port()
    config = uvicorn.Config(judge.app(), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield judge, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _answer() -> list[StreamEvent]:
    """3 text and 3 tool_use blocks, alternating, each split into many deltas."""
    blocks = []
    for number in range(6):
        if number % 2 == 0:
            blocks.append(text_block(number, *[f"block{number}word{n} " for n in range(90)]))
        else:
            command = {"command": f"echo {number} " + "x" * 400}
            blocks.append(tool_use_block(number, "Bash", command, chunks=10))
    return stream(*blocks, stop_reason="tool_use")


async def _timed(
    chain: Any, events: list[StreamEvent], gap: float, caller: str, *, held: bool = False
) -> tuple[float, float, float, float]:
    """(when the upstream sent its first text byte, or ended its first text block when
    `held`; the client's first text byte; the upstream's last event; the client's), in
    seconds from the start, the upstream's times as scheduled."""
    ctx = PolicyContext("messages", True, "bench", caller=caller)
    started = time.perf_counter()
    upstream_text = client_text = 0.0
    upstream_end = 0.0
    text_seen = False
    for number, event in enumerate(events):
        due = started + number * gap
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        upstream_end = due - started
        text_seen = text_seen or '"text_delta"' in event.data
        mark = event.type == "content_block_stop" if held else '"text_delta"' in event.data
        if not upstream_text and text_seen and mark:
            upstream_text = upstream_end
        out = await chain.apply_stream_event(StreamEvent(event.event, event.data), ctx)
        if not client_text and any('"text_delta"' in o.data for o in out):
            client_text = time.perf_counter() - started
    await chain.apply_stream_end(ctx)
    return upstream_text, client_text, upstream_end, time.perf_counter() - started


def _chain(url: str, **options: Any) -> Any:
    base = {"rules": "Nothing dangerous.", "base_url": url, "api_key_env": "BENCH_NO_KEY"}
    return load_chain({"policies": [{"policy": "rules_judge", "options": {**base, **options}}]})


def judge(env: Any, raw: dict[str, Any]) -> list[Figure]:
    return asyncio.run(_figures(raw))


async def _figures(raw: dict[str, Any]) -> list[Figure]:
    events = _answer()
    gap = ANSWER_S / len(events)
    latency_ms = JUDGE_LATENCY_S * 1000
    with _judge_service() as (service, url):
        found: dict[str, Any] = {}
        for mode in ("stream", "hold"):
            chain = _chain(url, judge=["tool_use", "text"], text_mode=mode)
            before = service.calls
            first = await _timed(chain, events, gap, "bench-a", held=mode == "hold")
            calls = service.calls - before
            replay = await _timed(chain, events, gap, "bench-a", held=mode == "hold")
            found[mode] = {
                "first_text_added_ms": (first[1] - first[0]) * 1000,
                "end_added_ms": (first[3] - first[2]) * 1000,
                "judge_calls": calls,
                "replay_judge_calls": service.calls - before - calls,
                "replay_end_added_ms": (replay[3] - replay[2]) * 1000,
            }
        hostile = stream(
            *[tool_use_block(n, "Bash", {"command": f"echo {n}"}) for n in range(HOSTILE_BLOCKS)],
            stop_reason="tool_use",
        )
        before = service.calls
        chain = _chain(url, max_judged_blocks=MAX_JUDGED)
        attack = await _timed(chain, hostile, HOSTILE_GAP_S, "bench-b")
        found["hostile"] = {
            "blocks": HOSTILE_BLOCKS,
            "judge_calls": service.calls - before,
            "after_end_ms": (attack[3] - attack[2]) * 1000,
        }
    raw["judge"] = {"judge_latency_ms": latency_ms, "event_gap_ms": gap * 1000, **found}
    stream_mode, hold, hostile_found = found["stream"], found["hold"], found["hostile"]
    return [
        Figure(
            "(17) judged stream, stream mode: first text byte added",
            stream_mode["first_text_added_ms"],
            "ms",
            "≈ 0",
            stream_mode["first_text_added_ms"] <= 10,
            f"judge L = {latency_ms:.0f} ms, an upstream event every {gap * 1000:.0f} ms",
        ),
        Figure(
            "(17) judged stream, hold mode: first text byte after its block's end",
            hold["first_text_added_ms"],
            "ms",
            f"≤ L + 10 ms + an event gap ({latency_ms + 10 + gap * 1000:.0f})",
            hold["first_text_added_ms"] <= latency_ms + 10 + gap * 1000,
            "the held block is released by the first upstream event after its verdict",
        ),
        Figure(
            "(17) judged stream: end of answer added (hold / stream)",
            hold["end_added_ms"],
            "ms",
            f"≤ 1.3 L ({1.3 * latency_ms:.0f})",
            max(hold["end_added_ms"], stream_mode["end_added_ms"]) <= 1.3 * latency_ms,
            f"stream mode {stream_mode['end_added_ms']:.0f} ms; 6 blocks judged: "
            f"{hold['judge_calls']} and {stream_mode['judge_calls']} calls, "
            f"replayed: {hold['replay_judge_calls']} and {stream_mode['replay_judge_calls']}",
        ),
        Figure(
            "(17) judge calls for the answer, then for its replay",
            hold["judge_calls"],
            "calls",
            "6, then 0",
            hold["judge_calls"] == 6
            and stream_mode["judge_calls"] == 6
            and hold["replay_judge_calls"] == 0
            and stream_mode["replay_judge_calls"] == 0,
            f"replayed: {hold['replay_judge_calls']} (hold), "
            f"{stream_mode['replay_judge_calls']} (stream)",
        ),
        Figure(
            f"(18) hostile answer of {HOSTILE_BLOCKS} tool_use blocks: judge calls",
            hostile_found["judge_calls"],
            "calls",
            f"≤ max_judged_blocks ({MAX_JUDGED})",
            hostile_found["judge_calls"] <= MAX_JUDGED,
            f"handled {hostile_found['after_end_ms']:.0f} ms after the upstream's end "
            "(target ≤ 2000 ms)",
        ),
        Figure(
            f"(18) hostile answer of {HOSTILE_BLOCKS} tool_use blocks: handled after its end",
            hostile_found["after_end_ms"],
            "ms",
            "≤ 2000 ms",
            hostile_found["after_end_ms"] <= 2000,
            "every block past the bound is a judge error (blocked, fail-secure)",
        ),
    ]
