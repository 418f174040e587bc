"""`make bench`: Policy Gateway side by side with direct access, in one run.

Everything runs on loopback: an instant fake upstream (bench/upstream_stub.py)
in its own process, each gateway as a real `python -m policy_gateway serve`
child process, and a moto server in this process for the fallback flag (SSM)
and the fallback budget's table (DynamoDB). Figure (8) builds the artifact
`sam deploy` ships and starts it through its own run.sh under python3.13.
One raw-socket client (bench/wire.py) calls both the upstream directly and the
gateway, alternating which goes first, so drift on a noisy machine lands on
both sides alike. Every figure is a difference or a ratio from the same run.

Prints a table (figure, target, pass/fail), writes the raw figures to
bench/results/latest.json and a chart of the latency distributions to
bench/results/latency.png.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from wire import Connection, Response, get_status, stream_to_end

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
HOST = "127.0.0.1"
PATH = "/v1/messages"

LATENCY_PAIRS = 2000
WARMUP = 200
TTFE_PAIRS = 500
THROUGHPUT_EVENTS = 5000
THROUGHPUT_RUNS = 10
LARGE_BYTES = 4 * 1024 * 1024
LARGE_PAIRS = 40
FALLBACK_PAIRS = 300
COLD_RUNS = 5
STREAMS = 200
STREAM_EVENTS = 50
STREAM_INTERVAL_MS = 40
RESULT_LINES = 10_000
RESULT_RUNS = 5

TARGET = "BENCH_TARGET"
REWRITTEN = "BENCH_REWRITE"
NOOP_CHAIN = json.dumps({"policies": [{"policy": "noop"}]})
REPLACE_CHAIN = json.dumps(
    {"policies": [{"policy": "string_replace", "options": {"replacements": [[TARGET, REWRITTEN]]}}]}
)
BLOCK_CHAIN = json.dumps(
    {"policies": [{"policy": "block_tool_calls", "options": {"rules": [{"tool": "^bash$"}]}}]}
)
FLAG_ON = "/bench/fallback-on"
FLAG_OFF = "/bench/fallback-off"
BUDGET_TABLE = "bench-fallback-budget"
# Every benchmark fallback comes from one caller; the budget must not end them.
UNLIMITED_BUDGET = str(10**9)
# The built artifact reads its chain from SSM, as the template configures it.
CHAIN_PARAMETER = "/bench/policy-config"
PYTHON313_SCRIPT = ROOT / "release" / "python313.py"
FUNCTION = "GatewayFunction"
LAYER = "PoliciesLayer"
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


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    target: str
    passed: bool | None
    detail: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ms(seconds: float) -> float:
    return seconds * 1000


def request_body(size: int, text: str = f"Say hello. {TARGET}", stream: bool = False) -> bytes:
    """A Messages request of about `size` bytes: a conversation of alternating turns."""
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": "You are a concise assistant.",
        "messages": [],
    }
    if stream:
        request["stream"] = True
    turn = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 36
    messages: list[dict[str, Any]] = request["messages"]
    while len(json.dumps(request)) + len(turn) < size:
        role = "user" if len(messages) % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [{"type": "text", "text": f"{TARGET} {turn}"}]})
    if messages and messages[-1]["role"] == "user":
        messages.pop()
    padding = max(0, size - len(json.dumps(request)) - 60)
    messages.append({"role": "user", "content": f"{text} {'x' * padding}"})
    return json.dumps(request).encode()


# --- processes ---------------------------------------------------------------------------


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"nothing listening on {port} after {timeout}s")


def spawn(args: list[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
    out = open(RESULTS / log, "wb")  # noqa: SIM115 - closed with the process by stop()
    return subprocess.Popen(args, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def running(args: list[str], env: dict[str, str], log: str, port: int) -> Iterator[int]:
    """A child process serving on `port` until the block ends; yields its pid."""
    process = spawn(args, env, log)
    try:
        wait_listening(port, process)
        yield process.pid
    finally:
        stop(process)


def gateway_args(port: int) -> list[str]:
    return [sys.executable, "-m", "policy_gateway", "serve", "--port", str(port)]


class Environment:
    """The upstream stub and moto, and the environment a gateway child process gets."""

    def __init__(self, stack: ExitStack) -> None:
        from moto.server import ThreadedMotoServer

        # moto's werkzeug server logs every request; only the table belongs on the terminal.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)

        self.upstream_port = free_port()
        stack.enter_context(
            running(
                [sys.executable, str(BENCH / "upstream_stub.py"), str(self.upstream_port)],
                dict(os.environ),
                "upstream.log",
                self.upstream_port,
            )
        )
        moto_port = free_port()
        moto = ThreadedMotoServer(ip_address=HOST, port=moto_port, verbose=False)
        moto.start()
        stack.callback(moto.stop)
        self.aws = {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_SSM": f"http://{HOST}:{moto_port}",
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://{HOST}:{moto_port}",
        }
        import boto3
        from policy_gateway.fallback.budget_table import create_table

        def client(service: str) -> Any:
            return boto3.client(  # type: ignore[call-overload]
                service,
                endpoint_url=self.aws["AWS_ENDPOINT_URL_SSM"],
                region_name=self.aws["AWS_REGION"],
                aws_access_key_id=self.aws["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=self.aws["AWS_SECRET_ACCESS_KEY"],
            )

        ssm = client("ssm")
        ssm.put_parameter(Name=FLAG_ON, Value="true", Type="String", Overwrite=True)
        ssm.put_parameter(Name=FLAG_OFF, Value="false", Type="String", Overwrite=True)
        ssm.put_parameter(Name=CHAIN_PARAMETER, Value=REPLACE_CHAIN, Type="String", Overwrite=True)
        create_table(client("dynamodb"), BUDGET_TABLE)

    def gateway_env(
        self,
        chain: str,
        flag: str = FLAG_OFF,
        budget_table: str | None = None,
        bedrock: bool = False,
    ) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AWS_", "POLICY_", "FALLBACK_", "LAMBDA_", "UPSTREAM_"))
        }
        upstream = f"http://{HOST}:{self.upstream_port}"
        # The stub answers Bedrock's paths too; the gateway signs for it as for AWS.
        provider = (
            {"UPSTREAM_PROVIDER": "bedrock", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": upstream}
            if bedrock
            else {}
        )
        return {
            **env,
            **self.aws,
            **provider,
            "PYTHONUNBUFFERED": "1",
            "UPSTREAM_BASE_URL": upstream,
            "POLICY_CONFIG": chain,
            "FALLBACK_FLAG_PARAMETER": flag,
            "FALLBACK_BUDGET": UNLIMITED_BUDGET,
            **({"FALLBACK_BUDGET_TABLE": budget_table} if budget_table else {}),
        }

    @contextmanager
    def gateway(
        self,
        name: str,
        chain: str,
        flag: str = FLAG_OFF,
        budget_table: str | None = None,
        bedrock: bool = False,
    ) -> Iterator[int]:
        """A gateway child process; yields its port."""
        port = free_port()
        env = self.gateway_env(chain, flag, budget_table, bedrock)
        with running(gateway_args(port), env, f"{name}.log", port):
            yield port


# --- measurements ------------------------------------------------------------------------


Call = Callable[[], Response]


def paired(first: Call, second: Call, pairs: int, warmup: int) -> tuple[list[float], list[float]]:
    """Time `pairs` calls of each, alternating which goes first; seconds, after a warm-up."""
    times: tuple[list[float], list[float]] = ([], [])
    for index in range(warmup + pairs):
        order = ((0, first), (1, second)) if index % 2 == 0 else ((1, second), (0, first))
        for side, call in order:
            response = call()
            if response.status != 200:
                raise RuntimeError(f"benchmark call answered {response.status}: {response.body!r}")
            if index >= warmup:
                times[side].append(response.seconds)
    return times


def ttfe_paired(first: Call, second: Call, pairs: int) -> tuple[list[float], list[float]]:
    def first_event(call: Call) -> Call:
        def timed() -> Response:
            response = call()
            assert response.first_event_seconds is not None, "stream without an event"
            response.seconds = response.first_event_seconds
            return response

        return timed

    return paired(first_event(first), first_event(second), pairs, warmup=50)


def added(gateway: list[float], direct: list[float], q: float) -> float:
    """Percentile `q` of the per-pair differences, in ms.

    Each pair ran back to back, so load from elsewhere on the machine (other
    processes come and go on a shared 2-core box) mostly hits both sides of a
    pair alike and cancels out, where a difference of two percentiles would not.
    """
    return ms(percentile([g - d for g, d in zip(gateway, direct, strict=True)], q))


def pair_ratio(first: list[float], second: list[float]) -> float:
    """Median of the per-pair ratios: drift cancels within each back-to-back pair (see added)."""
    return statistics.median(a / b for a, b in zip(first, second, strict=True))


def whole_stream(connection: Connection, body: bytes, headers: dict[str, str]) -> Call:
    """One streaming call that must deliver every one of the THROUGHPUT_EVENTS events."""

    def call() -> Response:
        response = connection.post(PATH, body, headers)
        if response.events != THROUGHPUT_EVENTS:
            raise RuntimeError(f"{response.events} of {THROUGHPUT_EVENTS} events arrived")
        return response

    return call


def measure_latency(env: Environment, gateway: int, raw: dict[str, Any]) -> list[Figure]:
    body = request_body(1024)
    direct = Connection(HOST, env.upstream_port)
    through = Connection(HOST, gateway)
    gw, dr = paired(
        lambda: through.post(PATH, body), lambda: direct.post(PATH, body), LATENCY_PAIRS, WARMUP
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


def measure_streaming(env: Environment, gateway: int, raw: dict[str, Any]) -> list[Figure]:
    body = request_body(1024, stream=True)
    direct = Connection(HOST, env.upstream_port)
    through = Connection(HOST, gateway)
    short = {"x-bench-events": "10"}
    gw, dr = ttfe_paired(
        lambda: through.post(PATH, body, short), lambda: direct.post(PATH, body, short), TTFE_PAIRS
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


def measure_results_stream(env: Environment, gateway: int, raw: dict[str, Any]) -> Figure:
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


def measure_bedrock_stream(anthropic: int, bedrock: int, raw: dict[str, Any]) -> Figure:
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


def measure_armed_fallback(on: int, off: int, raw: dict[str, Any]) -> Figure:
    body = request_body(LARGE_BYTES)
    armed = Connection(HOST, on)
    disarmed = Connection(HOST, off)
    on_s, off_s = paired(
        lambda: armed.post(PATH, body), lambda: disarmed.post(PATH, body), LARGE_PAIRS, warmup=3
    )
    raw["armed"] = {"bytes": len(body), "flag_on_s": on_s, "flag_off_s": off_s}
    ratio = pair_ratio(on_s, off_s)
    return Figure(
        "(3) 4 MB request, flag on / off (p50 of pairs)",
        ratio,
        "x",
        "<= 1.05",
        ratio <= 1.05,
        f"on {ms(statistics.median(on_s)):.1f} ms, off {ms(statistics.median(off_s)):.1f} ms",
    )


def measure_full_fallback(env: Environment, on: int, raw: dict[str, Any]) -> Figure:
    body = request_body(1024)
    through = Connection(HOST, on)
    reject = {"x-bench-reject": REWRITTEN}
    fell_back, plain = paired(
        lambda: through.post(PATH, body, reject),
        lambda: through.post(PATH, body),
        FALLBACK_PAIRS,
        20,
    )
    raw["fallback"] = {"fallback_s": fell_back, "plain_s": plain}
    ratio = pair_ratio(fell_back, plain)
    return Figure(
        "(4) full fallback (400, retry) / plain",
        ratio,
        "x",
        "report",
        None,
        f"fallback {ms(statistics.median(fell_back)):.2f} ms, "
        f"plain {ms(statistics.median(plain)):.2f} ms (p50)",
    )


def measure_budget_check(on: int, on_shared: int, raw: dict[str, Any]) -> Figure:
    """What counting a fallback in DynamoDB (a local moto) adds over counting it in the process."""
    body = request_body(1024)
    reject = {"x-bench-reject": REWRITTEN}
    in_table = Connection(HOST, on_shared)
    in_process = Connection(HOST, on)
    shared, local = paired(
        lambda: in_table.post(PATH, body, reject),
        lambda: in_process.post(PATH, body, reject),
        FALLBACK_PAIRS,
        20,
    )
    raw["budget_check"] = {"dynamodb_s": shared, "in_process_s": local}
    return Figure(
        "(7) fallback budget check, DynamoDB (local moto) vs in-process, added p50",
        added(shared, local, 50),
        "ms",
        "report",
        None,
        f"fallback {ms(statistics.median(shared)):.2f} ms with the table, "
        f"{ms(statistics.median(local)):.2f} ms in-process (p50)",
    )


def cold_start(args: list[str], env: dict[str, str], port: int, log: str) -> tuple[float, float]:
    """Seconds from spawning the process to /healthz answering 200, and to a first answered POST."""
    started = time.perf_counter()
    process = spawn(args, env, log)
    try:
        deadline = started + 30
        while get_status(HOST, port, "/healthz") != 200:
            if process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"{args} did not become ready")
            time.sleep(0.002)
        ready = time.perf_counter() - started
        response = Connection(HOST, port).post(PATH, request_body(1024))
        return ready, time.perf_counter() - started if response.status == 200 else float("nan")
    finally:
        stop(process)


def cold_starts(
    floor: Callable[[int], tuple[list[str], dict[str, str]]],
    gateway: Callable[[int], tuple[list[str], dict[str, str]]],
    log: str,
) -> tuple[list[float], list[float], list[float]]:
    """COLD_RUNS alternating starts: the bare app ready, the gateway ready and first answering.

    `floor` and `gateway` give the command and environment for a port.
    """
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


def measure_cold_start(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    floor, ready, answered = cold_starts(
        lambda port: ([sys.executable, str(BENCH / "floor_app.py"), str(port)], dict(os.environ)),
        lambda port: (gateway_args(port), env.gateway_env(NOOP_CHAIN)),
        "cold",
    )
    raw["cold_start"] = {"floor_s": floor, "ready_s": ready, "first_answer_s": answered}
    base = statistics.median(floor)
    figures = []
    # Reported only. Readiness used to be answered before the gateway was built,
    # against a target for exactly that; since issue 13 /healthz waits for the
    # build and the first AWS reads, and the cold-start target is figure (8)'s:
    # the built artifact's first answer.
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


def python313() -> tuple[str, dict[str, str]]:
    """python3.13 as `sam build` finds it, and what the environment needs for that (pyenv)."""
    spec = importlib.util.spec_from_file_location("release_python313", PYTHON313_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    finder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(finder)
    found: tuple[str, dict[str, str]] | None = finder.find(os.environ)
    if found is None:
        raise RuntimeError(f"the artifact figure needs python3.13 ({PYTHON313_SCRIPT})")
    return found


def set_writable(tree: Path, writable: bool) -> None:
    for path in (tree, *tree.rglob("*")):
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode | 0o200 if writable else mode & ~0o222)


@contextmanager
def sam_artifact(python_env: dict[str, str]) -> Iterator[Path]:
    """`sam build` for this machine, read-only like Lambda's /var/task and /opt."""
    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    with (
        tempfile.TemporaryDirectory(prefix="bench-sam-") as tmp,
        open(RESULTS / "sam.log", "wb") as log,
    ):
        build = Path(tmp) / "build"
        subprocess.run(
            [
                str(Path(sys.executable).parent / "sam"),
                "build",
                "--template-file",
                str(ROOT / "template.yaml"),
                "--build-dir",
                str(build),
                "--parameter-overrides",
                f"Architecture={arch}",
                "--no-cached",
                "--no-use-container",
            ],
            cwd=ROOT,
            env={**os.environ, **python_env, "SAM_CLI_TELEMETRY": "0"},
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
        set_writable(build, False)
        try:
            yield build
        finally:
            set_writable(build, True)


def measure_artifact_cold_start(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    """What `sam deploy` ships, started through its own run.sh as the adapter starts it.

    python3.13, the tree read-only (and, since root may write anyway, no bytecode
    written: every start is as cold as Lambda's), the chain and the flag from SSM.
    The floor is a bare app on the artifact's own uvicorn under the same python3.13.
    """
    executable, python_env = python313()
    with sam_artifact(python_env) as build, tempfile.TemporaryDirectory() as bin_dir:
        # run.sh runs `python3`, which in the runtime is 3.13.
        (Path(bin_dir) / "python3").symlink_to(executable)
        function = build / FUNCTION
        common = {
            **python_env,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        gateway = {
            **env.gateway_env(REPLACE_CHAIN),
            **common,
            # run.sh adds the task root and /opt/python; here the layer is not at /opt.
            "PYTHONPATH": str(build / LAYER / "python"),
            "POLICY_CONFIG_PARAMETER": CHAIN_PARAMETER,
            "AWS_EC2_METADATA_DISABLED": "true",
            # Tracing on, as in Lambda; spans go to a port nobody reads.
            "LAMBDA_TASK_ROOT": str(function),
            "AWS_XRAY_DAEMON_ADDRESS": f"{HOST}:{free_port()}",
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
        split_env = {**gateway, "PYTHONPATH": f"{build / LAYER / 'python'}{os.pathsep}{function}"}
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
    limit = 1.5 * base
    return [
        Figure(
            "(8) artifact: cold start to first answered request",
            ms(first),
            "ms",
            f"<= {ms(limit):.0f}",
            first <= limit,
            f"bare app ready {ms(base):.0f} ms; {first / base:.2f}x; "
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


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def peak_rss_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident set size of `pid` in MB, from the kernel's own counters."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def measure_memory(env: Environment, raw: dict[str, Any]) -> Figure:
    port = free_port()
    body = request_body(1024, stream=True)
    headers = {"x-bench-events": str(STREAM_EVENTS), "x-bench-interval-ms": str(STREAM_INTERVAL_MS)}
    with running(gateway_args(port), env.gateway_env(NOOP_CHAIN), "memory.log", port) as pid:
        Connection(HOST, port).post(PATH, body, {"x-bench-events": "5"})
        idle, _ = peak_rss_mb(pid)

        async def all_streams() -> list[int]:
            return await asyncio.gather(
                *(stream_to_end(HOST, port, PATH, body, headers) for _ in range(STREAMS))
            )

        started = time.perf_counter()
        asyncio.run(all_streams())
        seconds = time.perf_counter() - started
        _, peak = peak_rss_mb(pid)
    raw["memory"] = {"idle_mb": idle, "peak_mb": peak, "streams": STREAMS, "seconds": seconds}
    return Figure(
        f"(6) peak RSS, {STREAMS} concurrent streams",
        peak,
        "MB",
        "< 150",
        peak < 150,
        f"idle {idle:.0f} MB; streams took {seconds:.1f} s",
    )


# --- report ------------------------------------------------------------------------------


def table(figures: list[Figure]) -> str:
    rows = [("figure", "value", "target", "result", "detail")]
    for figure in figures:
        verdict = "info" if figure.passed is None else ("PASS" if figure.passed else "FAIL")
        value = f"{figure.value:,.0f}" if figure.value >= 1000 else f"{figure.value:.2f}"
        rows.append((figure.name, f"{value} {figure.unit}", figure.target, verdict, figure.detail))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        # Other work on the machine shows up as noise; the load says how much there was.
        "load_average": os.getloadavg(),
    }


def chart(raw: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("Non-streaming, 1 KB (noop chain)", raw["latency"], "direct_s", "gateway_s"),
        ("Time to first event", raw["ttfe"], "direct_s", "gateway_s"),
        ("4 MB request, string_replace", raw["armed"], "flag_off_s", "flag_on_s"),
    )
    figure, axes = plt.subplots(1, len(panels), figsize=(15, 4.2))
    for axis, (title, data, left, right) in zip(axes, panels, strict=True):
        for key, color in ((left, "tab:blue"), (right, "tab:orange")):
            values = sorted(ms(value) for value in data[key])
            share = [(index + 1) / len(values) for index in range(len(values))]
            label = key.removesuffix("_s").replace("_", " ")
            axis.plot(
                values, share, color=color, label=f"{label} (p50 {percentile(values, 50):.2f} ms)"
            )
        axis.set_title(title)
        axis.set_xlabel("ms")
        axis.set_ylabel("share of requests")
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right")
    figure.suptitle("Policy Gateway vs direct access (CDF, loopback, instant upstream)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    started = time.perf_counter()
    raw: dict[str, Any] = {"machine": machine()}
    figures: list[Figure] = []
    with ExitStack() as stack:
        env = Environment(stack)
        figures += measure_cold_start(env, raw)
        figures += measure_artifact_cold_start(env, raw)
        with env.gateway("noop", NOOP_CHAIN) as noop:
            figures += measure_latency(env, noop, raw)
            figures += measure_streaming(env, noop, raw)
            with env.gateway("bedrock", NOOP_CHAIN, bedrock=True) as bedrock:
                figures.append(measure_bedrock_stream(noop, bedrock, raw))
        with env.gateway("results", BLOCK_CHAIN) as results:
            figures.append(measure_results_stream(env, results, raw))
        with (
            env.gateway("flag-on", REPLACE_CHAIN, FLAG_ON) as on,
            env.gateway("flag-off", REPLACE_CHAIN, FLAG_OFF) as off,
            env.gateway("flag-on-shared-budget", REPLACE_CHAIN, FLAG_ON, BUDGET_TABLE) as shared,
        ):
            figures.append(measure_armed_fallback(on, off, raw))
            figures.append(measure_full_fallback(env, on, raw))
            figures.append(measure_budget_check(on, shared, raw))
        figures.append(measure_memory(env, raw))
    raw["figures"] = [asdict(figure) for figure in figures]
    raw["seconds"] = time.perf_counter() - started
    (RESULTS / "latest.json").write_text(json.dumps(raw, indent=1))
    chart(raw, RESULTS / "latency.png")
    info = raw["machine"]
    print(
        f"\nPolicy Gateway benchmark: {info['cpus']} CPUs ({info['cpu']}), "
        f"Python {info['python']}, load average at start {info['load_average'][0]:.2f}"
    )
    print(table(figures))
    print(f"\n{raw['seconds']:.0f} s; raw figures and chart in {RESULTS}")
    return 0 if all(figure.passed is not False for figure in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
