"""Figure (9): a SnapStart cold start, from the adapter's after-restore hook to the first answer.

With SnapStart, Lambda resumes a cold start from the snapshot it took after
init: the interpreter, the imports, the built gateway and the first AWS reads
are already in memory. What remains is what the adapter does after a restore,
timed here on a real gateway process in the state the snapshot holds (built,
warmed, its before-checkpoint hook done): POST the after-restore hook (the
gateway re-reads the chain and the flag from SSM, rebuilds its clients,
re-seeds), GET /healthz (the adapter's readiness check), then the first call
on a new connection. The floor is the bare app's cold start to ready, as for
(5) and (8).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

from policy_gateway import settings

from .harness import BENCH, CHAIN_PARAMETER, HOST, MESSAGES, Environment, free_port, gateway_args
from .harness import running as running_process
from .report import Figure
from .startup import COLD_RUNS, cold_start
from .stats import ms
from .wire import Connection, get_status
from .workload import REPLACE_CHAIN, request_body

# The goal of issue 27: a restored cold start within half the bare app's start to ready.
RESTORE_GOAL = 0.5
BEFORE = settings.DEFAULT_SNAPSTART_BEFORE_CHECKPOINT_PATH
AFTER = settings.DEFAULT_SNAPSTART_AFTER_RESTORE_PATH


def restored_start(port: int) -> tuple[float, float]:
    """Seconds for the after-restore hook, and from the hook's start to the first answer."""
    if Connection(HOST, port).post(BEFORE, b"").status != 200:
        raise RuntimeError("the before-checkpoint hook failed")
    started = time.perf_counter()
    if Connection(HOST, port).post(AFTER, b"").status != 200:
        raise RuntimeError("the after-restore hook failed")
    hooked = time.perf_counter() - started
    if get_status(HOST, port, "/healthz") != 200:
        raise RuntimeError("not ready after the after-restore hook")
    if Connection(HOST, port).post(MESSAGES, request_body(1024)).status != 200:
        raise RuntimeError("the first call after the restore failed")
    return hooked, time.perf_counter() - started


def restore(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    """(9) The restore path against the bare app's ready time (goal: at most half of it)."""
    floor_env = dict(os.environ)
    floor = [
        cold_start([sys.executable, str(BENCH / "floor_app.py"), str(port)], floor_env, port, log)[
            0
        ]
        for port, log in ((free_port(), "restore-floor.log") for _ in range(COLD_RUNS))
    ]
    gateway_env = {
        **env.gateway_env(REPLACE_CHAIN),
        # As deployed: the chain (and, with its request hooks, the flag) from SSM.
        settings.ENV_POLICY_CONFIG_PARAMETER: CHAIN_PARAMETER,
        settings.ENV_SNAPSTART_HOOKS: "true",
    }
    port = free_port()
    with running_process(gateway_args(port), gateway_env, "restore.log", port):
        while get_status(HOST, port, "/healthz") != 200:
            time.sleep(0.01)
        # The first restore also builds the SSM client's session anew, as every real one does.
        runs = [restored_start(port) for _ in range(COLD_RUNS)]
    hooks = [hook for hook, _ in runs]
    firsts = [first for _, first in runs]
    raw["restore"] = {"floor_s": floor, "hook_s": hooks, "first_answer_s": firsts}
    base, hook, first = (statistics.median(x) for x in (floor, hooks, firsts))
    ratio = first / base
    return [
        Figure(
            "(9) SnapStart: after-restore hook to first answer",
            ms(first),
            "ms",
            f"<= {ms(RESTORE_GOAL * base):.0f}",
            ratio <= RESTORE_GOAL,
            f"bare app ready {ms(base):.0f} ms; {ratio:.2f}x (goal {RESTORE_GOAL}x); "
            f"hook {ms(hook):.0f} ms, readiness and first answer {ms(first - hook):.0f} ms",
        )
    ]
