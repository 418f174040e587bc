"""Figures (1) and (2) of several commits, in paired rounds on one machine and one stub.

    python -m bench.commits REV [REV ...] [--streams N] [--calls N]

Each REV (a commit, or `.` for the working tree) is exported with `git archive`
and served by its own gateway child process (its own `functions/gateway` and
`layers/policies` first on PYTHONPATH, this checkout's installed dependencies);
each round calls every gateway once, in an order drawn anew each round
(stats.rounds), so load from elsewhere on a shared machine weighs on every
commit alike. What issue 40 asked for when a relay's rate seemed to regress.

Beside the rate, each gateway's own CPU per relayed event (the kernel's utime and
stime of the process, over all the counted streams): what a commit costs, which the
machine's other work cannot inflate as it does a rate measured by the clock.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path

from .harness import HOST, MESSAGES, RESULTS, ROOT, Environment, free_port, gateway_args, running
from .latency import THROUGHPUT_EVENTS, whole_stream
from .memory import cpu_seconds
from .stats import Call, rounds
from .wire import Connection, Response
from .workload import NOOP_CHAIN, request_body


def export(rev: str, into: Path) -> Path:
    """The tree of `rev` (`.`: this checkout as it is), as a directory."""
    if rev == ".":
        return ROOT
    tree = into / rev
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def fresh_stream(port: int, pid: int, cpu: list[float]) -> Call:
    """A whole stream on a new connection (a kept-alive one may idle out between rounds);
    the gateway's CPU over it appended to `cpu`."""
    body = request_body(1024, stream=True)
    headers = {"x-bench-events": str(THROUGHPUT_EVENTS)}

    def call() -> Response:
        before = cpu_seconds(pid)
        response = whole_stream(Connection(HOST, port), body, headers)()
        cpu.append(cpu_seconds(pid) - before)
        return response

    return call


def added(through: Connection, direct: Connection, body: bytes) -> Call:
    """One 1 KB call through a gateway, timed as what it adds to the direct call after it."""

    def call() -> Response:
        response = through.post(MESSAGES, body)
        response.seconds -= direct.post(MESSAGES, body).seconds
        return response

    return call


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.commits")
    parser.add_argument("revs", nargs="+")
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--calls", type=int, default=600)
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as scratch:
        env = Environment(stack)
        ports: dict[str, int] = {}
        pids: dict[str, int] = {}
        cpu: dict[str, list[float]] = {}
        for rev in args.revs:
            tree = export(rev, Path(scratch))
            path = f"{tree}/functions/gateway:{tree}/layers/policies"
            ports[rev] = free_port()
            gateway = env.gateway_env(NOOP_CHAIN, extra={"PYTHONPATH": path})
            log = f"commit-{rev}.log"
            pids[rev] = stack.enter_context(
                running(gateway_args(ports[rev]), gateway, log, ports[rev])
            )
            cpu[rev] = []
        streams = rounds(
            {rev: fresh_stream(port, pids[rev], cpu[rev]) for rev, port in ports.items()},
            args.streams,
            3,
        )
        direct = Connection(HOST, env.upstream_port)
        small = request_body(1024)
        calls = {rev: added(Connection(HOST, port), direct, small) for rev, port in ports.items()}
        latency = rounds(calls, args.calls, 50)
    print(f"{args.streams} rounds of one {THROUGHPUT_EVENTS}-event stream, {args.calls} of (1)")
    for rev in args.revs:
        rates = [THROUGHPUT_EVENTS / seconds for seconds in streams[rev]]
        low, _, high = statistics.quantiles(rates, n=4)
        # The warm-up's streams are in `cpu` too: the counted ones are the last. Summed,
        # as the kernel counts in ticks of 10 ms, a tenth of one stream.
        per_event = sum(cpu[rev][-args.streams :]) / (args.streams * THROUGHPUT_EVENTS)
        print(
            f"{rev:>12}  (2) {statistics.median(rates):>9,.0f} events/s "
            f"(IQR {low:,.0f}-{high:,.0f}), gateway CPU {per_event * 1e6:.2f} us/event  "
            f"(1) added p50 {statistics.median(latency[rev]) * 1000:.2f} ms"
        )


if __name__ == "__main__":
    main()
