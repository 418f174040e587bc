"""`policy-gateway logs`: one readable line per call (call_lines.py), instead of raw JSON and EMF.

    make run | policy-gateway logs            # as the calls happen
    policy-gateway logs < run.log             # or --file run.log
    policy-gateway logs --stack NAME [--since 10m] [--follow]

Locally it reads `make run`'s output (standard input or a file); with
`--stack` it reads the stack's function's log group with FilterLogEvents,
from `--since` ago (default 10 minutes), and with `--follow` keeps polling
for new events as `aws logs tail --follow` does. A local run's output also
holds one line per request its upstream simulator received (local/upstream_view.py),
printed too, and so is every chain-load failure (`policy config unusable`,
chain_lines.py): a chain the gateways rejected shows without `--all`. EMF
documents and every other line are skipped unless `--all` asks for them
(printed as they are).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from ..local.upstream_view import is_received_line, readable_received
from ..names import LOG_CALL_FINISHED
from .call_lines import is_call_line, parse, readable
from .chain_lines import FAILURES, is_chain_failure, readable_failure
from .operator_errors import OperatorError

DEFAULT_SINCE = "10m"
POLL_SECONDS = 2.0
# Events of several log streams reach FilterLogEvents out of order: each poll
# re-reads this far behind the newest event seen, and skips the event ids it printed.
LATE_EVENTS_MS = 10_000
# Only call lines and chain-load failures come back from CloudWatch, which needs no
# client-side work to skip the rest.
CALL_LINES_PATTERN = (
    "{ "
    + " || ".join(f'($.message = "{message}")' for message in (LOG_CALL_FINISHED, *FAILURES))
    + " }"
)
_SINCE = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

Lines = Iterable[tuple[str, str | None]]
"""Log lines, each with the time its source recorded it (None where there is none)."""


def since_seconds(text: str) -> int:
    match = _SINCE.fullmatch(text.strip())
    if match is None:
        raise OperatorError(
            f"--since {text!r} is not a duration", "use e.g. 30s, 10m, 2h or 1d", exit_code=2
        )
    return int(match[1]) * _UNIT_SECONDS[match[2]]


def show(lines: Lines, out: TextIO, everything: bool) -> None:
    """Each call line as one readable line, each chain-load failure (chain_lines.py) and each
    line of what a local run's upstream simulator received; other lines only with
    `everything`, as they are."""
    for text, when in lines:
        for raw in text.splitlines():
            line = parse(raw)
            if line is not None and is_call_line(line):
                print(readable(line, when), file=out, flush=True)
            elif line is not None and is_received_line(line):
                print(readable_received(line, when), file=out, flush=True)
            elif line is not None and is_chain_failure(line):
                print(readable_failure(line, when), file=out, flush=True)
            elif everything and raw.strip():
                print(raw, file=out, flush=True)


def _stamp(milliseconds: int) -> str:
    return datetime.fromtimestamp(milliseconds / 1000, UTC).isoformat(timespec="milliseconds")


@dataclass
class LogTail:
    """A log group read forward with FilterLogEvents, each event once."""

    logs: Any
    group: str
    start_ms: int
    pattern: str | None
    _printed: dict[str, int] = field(default_factory=dict)

    def read(self) -> Iterator[tuple[str, str | None]]:
        """Every event since the last read (all pages), oldest first."""
        request: dict[str, Any] = {"logGroupName": self.group, "startTime": self.start_ms}
        if self.pattern:
            request["filterPattern"] = self.pattern
        newest = self.start_ms
        while True:
            page = self.logs.filter_log_events(**request)
            for event in page.get("events", []):
                if event["eventId"] in self._printed:
                    continue
                self._printed[event["eventId"]] = event["timestamp"]
                newest = max(newest, event["timestamp"])
                yield event["message"], _stamp(event["timestamp"])
            if not page.get("nextToken"):
                break
            request["nextToken"] = page["nextToken"]
        self.start_ms = max(self.start_ms, newest - LATE_EVENTS_MS)
        self._printed = {key: at for key, at in self._printed.items() if at >= self.start_ms}


def log_group(stack: str, region: str | None) -> tuple[str, Any]:
    """The stack's gateway log group and a CloudWatch Logs client for its region."""
    from .deployment import Deployment

    deployment = Deployment(stack, region)
    _ = deployment.stack
    try:
        configured = deployment.function.get("LoggingConfig", {}).get("LogGroup")
        group = configured or f"/aws/lambda/{deployment.function_name}"
    except LookupError as exc:
        raise OperatorError(
            str(exc), "is it a Policy Gateway stack? (sam list resources)"
        ) from None
    return str(group), deployment.client("logs")


def run(
    args: argparse.Namespace,
    out: TextIO = sys.stdout,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    polls: int | None = None,
) -> int:
    """The command; `polls` bounds `--follow` (a test's), which otherwise runs until ^C."""
    if not args.stack:
        if args.follow or args.since:
            raise OperatorError(
                "--follow and --since read a stack's log group: pass --stack NAME",
                "for a local run, pipe its output: make run | policy-gateway logs",
                exit_code=2,
            )
        if args.file:
            with open(args.file, encoding="utf-8", errors="replace") as source:
                show(((text, None) for text in source), out, args.all)
        else:
            show(((text, None) for text in sys.stdin), out, args.all)
        return 0
    from .. import settings

    start = clock() - since_seconds(args.since or DEFAULT_SINCE)
    group, logs = log_group(args.stack, args.region or settings.aws_region())
    tail = LogTail(logs, group, int(start * 1000), None if args.all else CALL_LINES_PATTERN)
    done = 0
    while True:
        show(tail.read(), out, args.all)
        done += 1
        if not args.follow or (polls is not None and done >= polls):
            return 0
        sleep(POLL_SECONDS)


def register(commands: Any) -> None:
    """The `logs` subcommand on `policy-gateway`'s parser."""
    watch = commands.add_parser(
        "logs",
        help="print one readable line per call, from make run's output (standard input or "
        "--file) or a stack's log group (--stack)",
    )
    watch.add_argument("--file", help="read this file of make run's output instead of stdin")
    watch.add_argument("--stack", help="read this stack's gateway log group in CloudWatch Logs")
    watch.add_argument("--region", help="the stack's region (default: the AWS configuration's)")
    watch.add_argument(
        "--since",
        help=f"with --stack: from this long ago, e.g. 30s, 10m, 2h, 1d (default {DEFAULT_SINCE})",
    )
    watch.add_argument(
        "--follow", action="store_true", help="with --stack: keep printing new calls until ^C"
    )
    watch.add_argument(
        "--all",
        action="store_true",
        help="also print every other line (EMF metric documents, warnings) as it is",
    )
    watch.set_defaults(handler=run)
