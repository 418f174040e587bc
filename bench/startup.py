"""Figures (5) and (8): how long a gateway takes from process start to answering.

Each start is timed against a floor, a bare uvicorn app (bench/floor_app.py)
started the same way, alternating: (5) the development gateway under this
interpreter; (8) the artifact `sam deploy` ships, built here and started
through its own run.sh under python3.13 as the Web Adapter starts it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from policy_gateway import settings
from policy_gateway.observability import tracing_settings

from release import sam_build

from .harness import (
    BENCH,
    CHAIN_PARAMETER,
    HOST,
    MESSAGES,
    RESULTS,
    Environment,
    free_port,
    gateway_args,
    spawn,
    stop,
)
from .report import Figure
from .stats import ms
from .wire import Connection, get_status
from .workload import NOOP_CHAIN, REPLACE_CHAIN, request_body

COLD_RUNS = 5
# The cold-start goal (issue 13): the artifact's first answer within 1.5x of
# the bare app's readiness. Reported, not enforced, until it is met.
ARTIFACT_GOAL = 1.5
# What the artifact figure times inside one python3.13: the gateway's own split
# of its start-up (the rest of the way to readiness is the interpreter and uvicorn).
SPLIT = """
import asyncio, json, time
started = time.perf_counter()
from policy_gateway.app import _build_gateway
from policy_gateway.settings import Settings
imported = time.perf_counter()
gateway = _build_gateway(Settings.from_env(), time.time)
built = time.perf_counter()
asyncio.run(gateway.warm())
print(json.dumps({"app_import_s": imported - started, "build_s": built - imported,
                  "aws_reads_s": time.perf_counter() - built}))
"""

# The command and environment that start a server on a port.
Start = Callable[[int], tuple[list[str], dict[str, str]]]


def cold_start(args: list[str], env: dict[str, str], port: int, log: str) -> tuple[float, float]:
    """Seconds from spawning the process to /healthz answering 200, and to a first answered POST."""
    started = time.perf_counter()
    process = spawn(args, env, log)
    try:
        deadline = started + 30
        while (status := get_status(HOST, port, "/healthz")) != 200:
            if process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"{args} did not become ready (last /healthz status {status})")
            time.sleep(0.002)
        ready = time.perf_counter() - started
        response = Connection(HOST, port).post(MESSAGES, request_body(1024))
        return ready, time.perf_counter() - started if response.status == 200 else float("nan")
    finally:
        stop(process)


def cold_starts(
    floor: Start, gateway: Start, log: str
) -> tuple[list[float], list[float], list[float]]:
    """COLD_RUNS alternating starts: the bare app ready, the gateway ready and first answering."""
    floors: list[float] = []
    ready: list[float] = []
    answered: list[float] = []
    for _ in range(COLD_RUNS):
        port = free_port()
        floors.append(cold_start(*floor(port), port, f"{log}-floor.log")[0])
        port = free_port()
        up, first = cold_start(*gateway(port), port, f"{log}.log")
        ready.append(up)
        answered.append(first)
    return floors, ready, answered


def development(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    """(5), reported only: since issue 13 /healthz waits for the build and the first AWS
    reads, and the cold-start goal is (8)'s, the built artifact's first answer."""
    floor, ready, answered = cold_starts(
        lambda port: ([sys.executable, str(BENCH / "floor_app.py"), str(port)], dict(os.environ)),
        lambda port: (gateway_args(port), env.gateway_env(NOOP_CHAIN)),
        "cold",
    )
    raw["cold_start"] = {"floor_s": floor, "ready_s": ready, "first_answer_s": answered}
    base = statistics.median(floor)
    figures = []
    for label, samples in (("ready (/healthz)", ready), ("first answered request", answered)):
        value = statistics.median(samples)
        figures.append(
            Figure(
                f"(5) cold start to {label}",
                ms(value),
                "ms",
                "report",
                None,
                f"floor {ms(base):.0f} ms; {value / base:.2f}x, +{ms(value - base):.0f} ms",
            )
        )
    return figures


def set_writable(tree: Path, writable: bool) -> None:
    for path in (tree, *tree.rglob("*")):
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode | 0o200 if writable else mode & ~0o222)


@contextmanager
def built_artifact(python: sam_build.Python313) -> Iterator[Path]:
    """`sam build` for this machine, read-only like Lambda's /var/task and /opt."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-sam-") as tmp,
        open(RESULTS / "sam.log", "wb") as log,
    ):
        build = Path(tmp) / "build"
        if sam_build.start(build, sam_build.host_architecture(), python, log).wait() != 0:
            raise RuntimeError(f"sam build failed: {RESULTS / 'sam.log'}")
        set_writable(build, False)
        try:
            yield build
        finally:
            set_writable(build, True)


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def artifact(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    """(8) What `sam deploy` ships, started through its own run.sh as the adapter starts it.

    python3.13, the tree read-only (and, since root may write anyway, no bytecode
    written: every start is as cold as Lambda's), the chain and the flag from SSM.
    The floor is a bare app on the artifact's own uvicorn under the same python3.13.
    """
    python = sam_build.find_python313()
    executable = str(python.executable)
    with built_artifact(python) as build, tempfile.TemporaryDirectory() as bin_dir:
        # run.sh runs `python3`, which in the runtime is 3.13.
        (Path(bin_dir) / "python3").symlink_to(executable)
        function = build / sam_build.FUNCTION
        layer_python = build / sam_build.LAYER / "python"
        common = {
            **python.env,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        gateway = {
            **env.gateway_env(REPLACE_CHAIN),
            **common,
            # run.sh adds the task root and /opt/python; here the layer is not at /opt.
            "PYTHONPATH": str(layer_python),
            settings.ENV_POLICY_CONFIG_PARAMETER: CHAIN_PARAMETER,
            "AWS_EC2_METADATA_DISABLED": "true",
            # Tracing on, as in Lambda; spans go to a port nobody reads.
            settings.ENV_LAMBDA_TASK_ROOT: str(function),
            tracing_settings.ENV_XRAY_DAEMON_ADDRESS: f"{HOST}:{free_port()}",
        }
        floor_env = {**os.environ, **common, "PYTHONPATH": str(function)}
        floor, ready, answered = cold_starts(
            lambda port: ([executable, str(BENCH / "floor_app.py"), str(port)], floor_env),
            lambda port: ([str(function / "run.sh")], {**gateway, "PORT": str(port)}),
            "artifact",
        )
        interpreter = [
            timed(lambda: subprocess.run([executable, "-c", "pass"], env=floor_env, check=True))
            for _ in range(COLD_RUNS)
        ]
        split_env = {**gateway, "PYTHONPATH": f"{layer_python}{os.pathsep}{function}"}
        # The gateway logs to stdout too; the split is the last line.
        splits = [
            json.loads(
                subprocess.run(
                    [executable, "-c", SPLIT], env=split_env, capture_output=True, check=True
                ).stdout.splitlines()[-1]
            )
            for _ in range(COLD_RUNS)
        ]
    split = {key: statistics.median(s[key] for s in splits) for key in splits[0]}
    split["interpreter_s"] = statistics.median(interpreter)
    raw["artifact_cold_start"] = {
        "floor_s": floor,
        "ready_s": ready,
        "first_answer_s": answered,
        "split_s": split,
    }
    base, up, first = (statistics.median(x) for x in (floor, ready, answered))
    ratio = first / base
    goal = "met" if ratio <= ARTIFACT_GOAL else "not met, issue 13"
    return [
        Figure(
            "(8) artifact: cold start to first answered request",
            ms(first),
            "ms",
            f"<= {ms(ARTIFACT_GOAL * base):.0f}",
            None,
            f"bare app ready {ms(base):.0f} ms; {ratio:.2f}x (goal {ARTIFACT_GOAL}x: {goal}); "
            f"/healthz ready {ms(up):.0f} ms",
        ),
        Figure(
            "(8) artifact: split of the start-up",
            ms(first),
            "ms",
            "report",
            None,
            f"interpreter {ms(split['interpreter_s']):.0f}, gateway imports "
            f"{ms(split['app_import_s']):.0f} + build {ms(split['build_s']):.0f}, SSM reads "
            f"{ms(split['aws_reads_s']):.0f}, first call {ms(first - up):.0f} ms",
        ),
    ]
