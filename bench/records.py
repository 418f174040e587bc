"""Figures (22) and (23): what recording costs (issue 43).

(22) The bytes stored for the 40-turn Claude Code-shaped session of figure (13)
(workload.agent_request: each turn's request is a prefix of the last one), every
call recorded by the gateway's own writer into a folder, over the session's last
request; the naive alternative, one object per call, is reported beside it.

(23) Two gateway processes, recording on for every caller and off, each sent the
same 1 MB streaming turn in alternating pairs: the added time to the client's
last event (`message_stop`), and the time from that event to the response's end,
which is when the Lambda invocation may end (the record is stored in between).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from policy_gateway.call import Call
from policy_gateway.lambda_context import InvocationContext
from policy_gateway.records.store import FolderStore
from policy_gateway.records.writer import RecordWriter

from .harness import HOST, Environment
from .report import Figure
from .stats import ms, percentile
from .wire import Connection
from .workload import agent_request, request_body, sdk_body, sources

SESSION_BYTES = 1_000_000
TURN_BYTES = 1_000_000
PAIRS = 40
WARMUP = 5
RATIO_TARGET = 1.3
ADDED_TARGET_MS = 1.0
RECORD_ALL = json.dumps({"policies": [], "record": {"enabled": True}})
RECORD_NONE = json.dumps({"policies": []})
EVENTS = {"x-bench-events": "40"}
"""The stub's answer: a well-formed stream of this many events."""


def records(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    return [*stored_bytes(raw), *added_time(env, raw)]


async def _discard(_: Any) -> None:
    pass


def stored_bytes(raw: dict[str, Any]) -> list[Figure]:
    request, marks = agent_request(sources(), SESSION_BYTES)
    messages = request["messages"]
    bodies: list[bytes] = []
    with tempfile.TemporaryDirectory() as folder:
        writer = RecordWriter(FolderStore(folder))
        for turn, mark in enumerate([1, *marks]):
            body = sdk_body({**request, "messages": messages[:mark]})
            bodies.append(body)
            following = messages[mark]["content"] if mark < len(messages) else "Done."
            answer = {
                "id": f"msg_{turn}",
                "type": "message",
                "role": "assistant",
                "model": request["model"],
                "content": following,
                "stop_reason": "tool_use" if mark < len(messages) else "end_turn",
                "usage": {"input_tokens": len(body) // 4, "output_tokens": 40},
            }
            call = Call(f"call-{turn:03d}", "messages", {}, _discard, InvocationContext(), None)
            call.caller, call.sent, call.status = "bench", body, 200
            recording = writer.recording()
            recording.answered_json(200, json.dumps(answer).encode())
            asyncio.run(writer.write(call, recording))
        stored = sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())
    last = len(bodies[-1])
    naive = sum(len(body) for body in bodies)
    raw["records_stored"] = {"calls": len(bodies), "stored": stored, "last": last, "naive": naive}
    detail = f"{len(bodies)} calls, {stored:,} bytes stored, last request {last:,} bytes"
    return [
        Figure(
            "(22) recorded session: bytes stored over its last request",
            stored / last,
            "x",
            f"<= {RATIO_TARGET}",
            stored / last <= RATIO_TARGET,
            detail,
        ),
        Figure(
            "(22) the naive alternative, one object per call, over the last request",
            naive / last,
            "x",
            "report",
            None,
            f"{naive:,} bytes",
        ),
    ]


def added_time(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    body = request_body(TURN_BYTES, stream=True)
    with tempfile.TemporaryDirectory() as folder:
        extra = {"RECORDS_DIR": folder}
        with (
            env.gateway("records-on", RECORD_ALL, extra=extra) as on_port,
            env.gateway("records-off", RECORD_NONE, extra=extra) as off_port,
        ):
            on, off = Connection(HOST, on_port), Connection(HOST, off_port)
            first: dict[str, list[float]] = {"on": [], "off": []}
            last: dict[str, list[float]] = {"on": [], "off": []}
            ended: dict[str, list[float]] = {"on": [], "off": []}
            for index in range(WARMUP + PAIRS):
                order = [("on", on), ("off", off)]
                for name, connection in order if index % 2 else order[::-1]:
                    response = connection.post("/v1/messages", body, EVENTS)
                    if response.status != 200 or response.last_event_seconds is None:
                        raise RuntimeError(f"records bench answered {response.status}")
                    if index >= WARMUP:
                        first[name].append(response.first_event_seconds or 0.0)
                        last[name].append(response.last_event_seconds)
                        ended[name].append(response.seconds - response.last_event_seconds)
            on.close()
            off.close()
            recorded = sum(1 for path in Path(folder).rglob("*.json"))
    added = [a - b for a, b in zip(last["on"], last["off"], strict=True)]
    first_added = ms(
        statistics.median(a - b for a, b in zip(first["on"], first["off"], strict=True))
    )
    raw["records_time"] = {
        "first_event_s": first,
        "last_event_s": last,
        "to_end_s": ended,
        "records": recorded,
    }
    added_p50 = ms(statistics.median(added))
    return [
        Figure(
            "(23) recording on over off: added time to the client's last event, 1 MB turn, p50",
            added_p50,
            "ms",
            f"<= {ADDED_TARGET_MS}",
            added_p50 <= ADDED_TARGET_MS,
            f"p90 {ms(percentile(added, 90)):.2f} ms over {PAIRS} pairs, {recorded} records; "
            f"first event: {first_added:+.2f} ms",
        ),
        Figure(
            "(23) recording on: last event to the response's end (the invocation may end), p50",
            ms(statistics.median(ended["on"])),
            "ms",
            "report",
            None,
            f"off: {ms(statistics.median(ended['off'])):.2f} ms",
        ),
    ]
