"""The gateway's chain-load lines as an operator reads them: what failed, and what is in force.

A `policy set` validated where a custom module is importable can still fail
to load in the gateways (their import path differs): they log an ERROR
(`policy config unusable; ...`) and keep the last good chain, logging its
`policy chain loaded` line again with `kept_last_good`. `policy-gateway logs`
prints each failure as one line by default, since a chain that quietly stays
old is what an operator must not miss:

    2026-01-01T12:00:00.123+00:00 chain load failed: policy config unusable; keeping the
      last good chain | parameter=/gw/policy-config error_type=PolicyConfigError error=...

and `policy show --stack` reads the load lines to say which version the
gateways run (`gateways_loaded`), when it is not the parameter's.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .. import names
from .call_lines import parse

FAILURES = (names.LOG_POLICY_CONFIG_KEPT_LAST_GOOD, names.LOG_POLICY_CONFIG_FAILING_CLOSED)
# `chain_version` of a chain from SSM: `v<parameter version>:<hash>.r<rules>`.
_PARAMETER_VERSION = re.compile(r"v(\d+):")


def is_chain_failure(line: dict[str, Any]) -> bool:
    return line.get("message") in FAILURES


def readable_failure(line: dict[str, Any], when: str | None = None) -> str:
    stamp = str(line.get("timestamp") or when or "-")
    details = [
        f"{key}={line[key]}" for key in ("parameter", "error_type", "error") if line.get(key)
    ]
    tail = f" | {' '.join(details)}" if details else ""
    return f"{stamp} chain load failed: {line['message']}{tail}"


@dataclass(frozen=True)
class Load:
    """One environment's latest load line (a CloudWatch log stream is one environment)."""

    version: str
    kept_last_good: bool
    at_ms: int


def parameter_version(chain_version: str) -> int | None:
    """The SSM parameter version a `chain_version` was built from; None for an inline one."""
    found = _PARAMETER_VERSION.match(chain_version)
    return int(found[1]) if found else None


def latest_loads(events: list[tuple[str, int, dict[str, Any]]]) -> dict[str, Load]:
    """Each log stream's latest `policy chain loaded` line, from (stream, ms, line) events."""
    latest: dict[str, Load] = {}
    for stream, at_ms, line in events:
        if line.get("message") != names.LOG_POLICY_CHAIN_LOADED:
            continue
        version = line.get("chain_version")
        if not isinstance(version, str):
            continue
        if stream not in latest or at_ms >= latest[stream].at_ms:
            latest[stream] = Load(version, line.get("kept_last_good") is True, at_ms)
    return latest


def loaded_report(
    loads: dict[str, Load], failure: dict[str, Any] | None, parameter: dict[str, Any]
) -> dict[str, Any]:
    """What `policy show` adds: the versions the environments last loaded, and a warning when
    any of them does not run the parameter's version (`failure`: the latest failure line
    since the parameter was written, if any)."""
    if not loads:
        return {"gateways_loaded": None}
    versions = Counter(parameter_version(load.version) for load in loads.values())
    report: dict[str, Any] = {
        "gateways_loaded": {
            "environments": len(loads),
            "versions": {
                ("inline" if version is None else f"v{version}"): count
                for version, count in versions.items()
            },
            "kept_last_good": sum(load.kept_last_good for load in loads.values()),
        }
    }
    current = int(parameter["Version"])
    behind = sorted({f"v{v}" if v else "inline" for v in versions if v != current})
    if not behind:
        return report
    lead = f"the gateways last loaded {', '.join(behind)}, not version {current}"
    if failure is not None:
        why = failure.get("error") or failure.get("error_type") or "see policy-gateway logs"
        report["warning"] = f"{lead}: they failed to load it and keep the last good chain ({why})"
    else:
        report["warning"] = f"{lead}: a `policy set` reaches them within the TTL + 1 s"
    return report


# How far back `policy show --stack` reads load lines: an environment logs one at its start
# and at each change, and Lambda environments seldom live longer.
LOAD_LINES_SINCE_SECONDS = 86400
LOAD_LINES_PATTERN = (
    "{ "
    + " || ".join(
        f'($.message = "{message}")' for message in (names.LOG_POLICY_CHAIN_LOADED, *FAILURES)
    )
    + " }"
)


def gateways_report(logs: Any, group: str, parameter: dict[str, Any], now: float) -> dict[str, Any]:
    """`loaded_report` from the stack's log group (FilterLogEvents, every page)."""
    written_ms = int(parameter["LastModifiedDate"].timestamp() * 1000)
    request: dict[str, Any] = {
        "logGroupName": group,
        "startTime": int((now - LOAD_LINES_SINCE_SECONDS) * 1000),
        "filterPattern": LOAD_LINES_PATTERN,
    }
    events: list[tuple[str, int, dict[str, Any]]] = []
    while True:
        page = logs.filter_log_events(**request)
        for event in page.get("events", []):
            line = parse(event["message"])
            if line is not None:
                events.append((event["logStreamName"], event["timestamp"], line))
        if not page.get("nextToken"):
            break
        request["nextToken"] = page["nextToken"]
    failures = [(at, line) for _, at, line in events if is_chain_failure(line) and at >= written_ms]
    failure = max(failures, key=lambda found: found[0], default=None)
    return loaded_report(latest_loads(events), None if failure is None else failure[1], parameter)
