"""Figures (12), (13) and (14): redaction on the traffic coding agents send (issue 32).

The workload is shaped like Claude Code's: a system prompt, twenty tool
definitions and a conversation whose tool results hold real source files (the
Python standard library's, read from disk here). (12) times the redaction hook
alone (no parse, no serialization) on a 1 MB request with every rule on and the
memo off; (13) replays a 40-turn session (each turn adds a tool call and a
result of source files, so the last request is about 1 MB; each turn parsed
afresh from the bytes the SDKs send, as the gateway's parse makes its strings)
and divides the session's hook CPU, memo on, by one scan of its last request,
then times the last turn through a gateway against the stub called directly,
memo on and off, beside the floor of a bare relay on the gateway's stack
(bench/relay_floor.py), all in the same rounds; (14) scans crafted 6 MB bodies, two per rule of the
catalogue (its keywords and alphabet repeated densely, and each keyword
followed by a run as long as the rule's reach) and, per family, partial
matches around a real one every ~800 characters (tests/support/crafted.py;
issue 40), with the whole rule set, each body as one text and as a request of
64 KB text blocks (one text's confirmation is bounded on its own, so an
attacker spreads a body over many).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from contextlib import ExitStack
from functools import partial
from typing import Any

import orjson
from gateway_policies.builtin.redact_secrets import RedactSecrets
from gateway_policies.detect import catalogue
from gateway_policies.detect.memo import configure
from gateway_policies.slots import text_slots
from gateway_policies.text import rewrite_slots
from policy_gateway import settings

from tests.support.crafted import BLOCK_CHARACTERS, around_units, repeated

from .harness import BENCH, HOST, MESSAGES, Environment, free_port, running
from .report import Figure
from .stats import added, ms, rounds
from .wire import Connection
from .workload import TURNS, agent_request, sdk_body, sources

REQUEST_BYTES = 1024 * 1024
SESSIONS = 7
"""(13) is the median of this many sessions over the median of as many scans of the last
request alone, the two taken in turn so that the machine's drift weighs on both alike."""
CRAFTED_BYTES = 6 * 1024 * 1024
MEMO_BYTES = str(settings.DEFAULT_POLICY_MEMO_BYTES)
ROUNDS = 100
WARMUP = 5
ALL_KINDS = list(dict.fromkeys(rule.kind for rule in catalogue()))
"""Every kind once (a kind may have more than one rule)."""
CHAIN = json.dumps({"policies": [{"policy": "redact_secrets", "options": {"kinds": ALL_KINDS}}]})


def hook_seconds(policy: RedactSecrets, request: dict[str, Any]) -> float:
    """CPU of the hook's work: every text slot rewritten by the hook's own step
    (`rewrite_slots`, each batch on_request takes), here in one batch."""
    started = time.process_time()
    rewrite_slots(list(text_slots(request, tool_inputs=True)), policy.rewrite_all, Counter())
    return time.process_time() - started


def alphabet(pattern: str) -> str:
    """The printable characters the pattern's classes admit, each once, in class order."""
    found = dict.fromkeys(
        chr(c)
        for cls in re.findall(r"\[(?:\\.|[^\]\\])+\]", pattern)
        for c in range(32, 127)
        if re.fullmatch(cls, chr(c))
    )
    return "".join(found) or "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def session_seconds(bodies: list[bytes]) -> float:
    """The hook's CPU over a session, each turn parsed just before its hook runs: its
    strings new, as the gateway's parse makes them (a copied turn would share its
    strings with the turns before it)."""
    session = RedactSecrets({"kinds": ALL_KINDS})
    return sum(hook_seconds(session, orjson.loads(body)) for body in bodies)


def crafted_bodies() -> dict[str, str]:
    """Two 6 MB bodies of near matches per rule of the catalogue (the generic and personal
    data kinds too): `dense`, each keyword (as written and upper case) then a few of the
    rule's alphabet, over and over; `reach`, each keyword then a run of the alphabet as long
    as the rule's reach, so every confirm window is as long as it can be."""
    bodies = {}
    for index, rule in enumerate(catalogue()):
        letters = alphabet(rule.pattern)
        keywords = [
            form for keyword in rule.keywords or ("",) for form in (keyword, keyword.upper())
        ]
        run = (letters * (rule.max_length // len(letters) + 1))[: rule.max_length]
        units = {
            "dense": "".join(f"{keyword}{letters[:40]}=" for keyword in keywords),
            "reach": "".join(f"{keyword}{run}\n" for keyword in keywords),
        }
        for shape, unit in units.items():
            bodies[f"{rule.kind} #{index} {shape}"] = repeated(unit, CRAFTED_BYTES)
    for kind, unit in around_units().items():
        bodies[f"{kind} around"] = repeated(unit, CRAFTED_BYTES)
    return bodies


def in_blocks(body: str) -> dict[str, Any]:
    """`body` as one user turn of text blocks of at most 64 KB."""
    content = [
        {"type": "text", "text": body[at : at + BLOCK_CHARACTERS]}
        for at in range(0, len(body), BLOCK_CHARACTERS)
    ]
    return {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": content}]}


def detect(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    files = sources()
    request, marks = agent_request(files, REQUEST_BYTES)
    whole = sdk_body(request)
    size = len(whole)
    policy = RedactSecrets({"kinds": ALL_KINDS})
    configure(0)
    hook_seconds(policy, orjson.loads(whole))
    alone = statistics.median(hook_seconds(policy, orjson.loads(whole)) for _ in range(7))

    turns = [{**request, "messages": request["messages"][:mark]} for mark in marks[:TURNS]]
    bodies = [sdk_body(turn) for turn in turns]
    # Each session with a policy instance of its own: a memo partition never seen.
    sessions, lasts = [], []
    for _ in range(SESSIONS):
        configure(settings.DEFAULT_POLICY_MEMO_BYTES)
        sessions.append(session_seconds(bodies))
        configure(0)
        lasts.append(hook_seconds(RedactSecrets({"kinds": ALL_KINDS}), orjson.loads(bodies[-1])))
    session_cpu, last = statistics.median(sessions), statistics.median(lasts)

    crafted, spread = {}, {}
    for name, body in crafted_bodies().items():
        started = time.process_time()
        policy.rewrite_counted(body)
        crafted[name] = time.process_time() - started
        spread[name] = hook_seconds(policy, in_blocks(body))
    worst = max(crafted, key=crafted.__getitem__)
    worst_spread = max(spread, key=spread.__getitem__)

    latency = through_gateway(env, turns, bodies)
    raw["detect"] = {
        "request_bytes": size,
        "hook_alone_s": alone,
        "session_turns": len(turns),
        "session_hook_cpu_s": session_cpu,
        "last_request_scan_s": last,
        "crafted_cpu_s": crafted,
        "crafted_in_blocks_cpu_s": spread,
        "last_turn_added_ms": latency,
    }
    figures = [
        Figure(
            "(12) redaction hook alone, 1 MB agent request, all rules, memo off",
            size / alone / 1e6,
            "MB/s",
            ">= 100",
            size / alone / 1e6 >= 100,
            f"{ms(alone):.1f} ms for {size:,} bytes, {len(ALL_KINDS)} kinds",
        ),
        Figure(
            f"(13) {len(turns)}-turn session: hook CPU over one scan of the last request, memo on",
            session_cpu / last,
            "x",
            "<= 2",
            session_cpu / last <= 2,
            f"session {ms(session_cpu):.1f} ms, last request alone {ms(last):.1f} ms",
        ),
    ]
    for memo, target in (("on", 5.0), ("off", 15.0)):
        figures.append(
            Figure(
                f"(13) last turn through the gateway over direct, memo {memo}, added p50",
                latency[memo],
                "ms",
                f"<= {target:g}",
                latency[memo] <= target,
                f"last request {len(bodies[-1]):,} bytes, as the SDKs write it",
            )
        )
    figures += [
        Figure(
            "(13) floor: a bare relay on the gateway's stack (uvicorn, httpx2, parse, serialize)",
            latency["floor"],
            "ms",
            "report",
            None,
            "bench/relay_floor.py over direct, added p50; in the same rounds as the gateway",
        ),
        Figure(
            "(13) the gateway, memo on, over that floor, added p50",
            latency["on over floor"],
            "ms",
            "report",
            None,
            "what the gateway and its redaction add beyond any relay on its stack",
        ),
    ]
    figures.append(
        Figure(
            "(13) the same, memo on, body as json.dumps writes it (spaces, \\u escapes)",
            latency["on, spaced"],
            "ms",
            "report",
            None,
            f"last request {len(json.dumps(turns[-1])):,} bytes; parsed by json, not orjson",
        )
    )
    figures.append(
        Figure(
            "(14) crafted 6 MB body, whole rule set, worst CPU",
            crafted[worst],
            "s",
            "<= 1",
            crafted[worst] <= 1.0,
            f"worst: {worst}; {len(crafted)} bodies",
        )
    )
    figures.append(
        Figure(
            "(14) the same bodies as 64 KB text blocks, whole rule set, worst CPU",
            spread[worst_spread],
            "s",
            "<= 1",
            spread[worst_spread] <= 1.0,
            f"worst: {worst_spread}; {len(spread)} bodies",
        )
    )
    return figures


def spaced_body(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode()


def through_gateway(
    env: Environment, turns: list[dict[str, Any]], sdk: list[bytes]
) -> dict[str, float]:
    """The last turn's added p50 over direct, every side in the same rounds: the gateway,
    its session replayed first, memo on and off with the bodies the SDKs write, and memo on
    with `json.dumps`' default (spaces, non-ASCII escaped) against direct with that body;
    the relay floor; and the gateway, memo on, over the floor. `sdk`: the turns as the SDKs
    write them."""
    spaced = [spaced_body(turn) for turn in turns]
    direct = Connection(HOST, env.upstream_port)
    sessions = {"on": (MEMO_BYTES, sdk), "off": ("0", sdk), "on, spaced": (MEMO_BYTES, spaced)}
    with ExitStack() as stack:
        floor = free_port()
        upstream = f"http://{HOST}:{env.upstream_port}"
        floor_args = [sys.executable, str(BENCH / "relay_floor.py"), str(floor), upstream]
        stack.enter_context(running(floor_args, dict(os.environ), "relay-floor.log", floor))
        ports = {
            label: stack.enter_context(
                env.gateway(
                    f"detect-memo-{label.replace(', ', '-')}",
                    CHAIN,
                    extra={settings.ENV_POLICY_MEMO_BYTES: memo},
                )
            )
            for label, (memo, _) in sessions.items()
        }
        # Connections opened once every server is up: a local serve closes one idle for 5 s.
        calls = {
            "direct": partial(direct.post, MESSAGES, sdk[-1]),
            "direct, spaced": partial(direct.post, MESSAGES, spaced[-1]),
            "floor": partial(Connection(HOST, floor).post, MESSAGES, sdk[-1]),
        }
        for label, (_, bodies) in sessions.items():
            gateway = Connection(HOST, ports[label])
            for body in bodies[:-1]:
                gateway.post(MESSAGES, body)
            calls[label] = partial(gateway.post, MESSAGES, bodies[-1])
        times = rounds(calls, ROUNDS, WARMUP)
    result = {
        label: added(times[label], times[baseline], 50)
        for label, baseline in (
            ("on", "direct"),
            ("off", "direct"),
            ("on, spaced", "direct, spaced"),
            ("floor", "direct"),
        )
    }
    result["on over floor"] = added(times["on"], times["floor"], 50)
    return result
