"""A chain the gateways rejected is visible where the operator looks (issue 39, item 6).

The issue's own scenario, with real parts: `policy set` validates a chain whose custom policy
module is on the operator's PYTHONPATH but not on the gateway's; a real `serve` reading the
parameter from moto's SSM fails to load it and keeps the last good chain. `policy-gateway
logs` shows that failure without `--all`; and, the gateway's lines put in a stack's log group,
`policy show --stack` says which version the gateways last loaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from policy_gateway import names, settings

from .support.cli import cli, status_of
from .support.clock import eventually
from .support.servers import gateway_process
from .support.stack import create_gateway_stack, gateway_environment

STACK = "gw-rejected"
PARAMETER = f"/{STACK}/policy-config"
GOOD = json.dumps({"policies": [{"policy": "noop", "options": {}}]})
MODULE = "operators_own_policy"
CUSTOM = json.dumps({"policies": [{"policy": f"{MODULE}:Stamp", "options": {}}]})
POLICY = '''
from gateway_policies import Policy


class Stamp(Policy):
    """A policy only the operator's machine has."""
'''


@pytest.fixture
def rejected_run(tmp_path: Path, moto_endpoint: str) -> tuple[Path, list[dict[str, Any]]]:
    """What a gateway printed (a file, and its JSON lines) when version 2 of its chain, a
    policy module it cannot import, replaced version 1."""
    ssm: Any = boto3.client("ssm")
    ssm.put_parameter(Name=PARAMETER, Value=GOOD, Type="String")
    (tmp_path / f"{MODULE}.py").write_text(POLICY)
    log = tmp_path / "run.log"
    env = {
        settings.ENV_POLICY_CONFIG_PARAMETER: PARAMETER,
        settings.ENV_POLICY_CONFIG_TTL: "1",
        "PYTHONUNBUFFERED": "1",
    }
    with gateway_process(env, stdout_path=log):
        operator = {
            settings.ENV_POLICY_CONFIG_PARAMETER: PARAMETER,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        }
        written = cli("policy", "set", str(_chain_file(tmp_path)), env=operator)
        assert written.returncode == 0, written.stderr
        assert "version 2" in written.stderr
        eventually(lambda: names.LOG_POLICY_CONFIG_KEPT_LAST_GOOD in log.read_text(), timeout=15)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return log, lines


def _chain_file(folder: Path) -> Path:
    chain = folder / "chain.json"
    chain.write_text(CUSTOM)
    return chain


def test_logs_shows_the_chain_the_gateway_rejected_without_all(
    rejected_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    log, _ = rejected_run
    shown = cli("logs", "--file", str(log))
    assert shown.returncode == 0, shown.stderr
    (failure,) = [line for line in shown.stdout.splitlines() if "chain load failed" in line]
    assert f"chain load failed: {names.LOG_POLICY_CONFIG_KEPT_LAST_GOOD} | " in failure
    assert f"parameter={PARAMETER} error_type=PolicyConfigError error=" in failure
    assert MODULE in failure
    assert not failure.startswith("{")


def _put_lines(group: str, stream: str, lines: list[dict[str, Any]], later_ms: int = 0) -> None:
    """The lines as one environment's log stream logged them, `later_ms` after now."""
    logs: Any = boto3.client("logs")
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
    now = int(time.time() * 1000) + later_ms
    logs.put_log_events(
        logGroupName=group,
        logStreamName=stream,
        logEvents=[
            {"timestamp": now + n, "message": json.dumps(line)} for n, line in enumerate(lines)
        ],
    )


def test_policy_show_says_which_version_the_gateways_last_loaded(
    rejected_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, printed = rejected_run
    loads = [
        line
        for line in printed
        if line.get("message")
        in (names.LOG_POLICY_CHAIN_LOADED, names.LOG_POLICY_CONFIG_KEPT_LAST_GOOD)
    ]
    assert [line["message"] for line in loads[:3]] == [
        names.LOG_POLICY_CHAIN_LOADED,  # version 1 at start
        names.LOG_POLICY_CONFIG_KEPT_LAST_GOOD,  # version 2 rejected ...
        names.LOG_POLICY_CHAIN_LOADED,  # ... version 1 kept
    ]
    assert loads[-1]["kept_last_good"] is True
    function = create_gateway_stack(STACK, gateway_environment(STACK))
    group = f"/aws/lambda/{function}"
    boto3.client("logs").create_log_group(logGroupName=group)
    # Another environment, started before the change, that has not logged since.
    _put_lines(group, "2026/01/01/[$LATEST]one", loads[:1])
    _put_lines(group, "2026/01/01/[$LATEST]two", loads)
    shown = status_of(cli("policy", "show", "--stack", STACK, "--region", "us-east-1"))
    assert shown["version"] == 2
    assert shown["gateways_loaded"] == {
        "environments": 2,
        "versions": {"v1": 2},
        "kept_last_good": 1,
    }
    assert shown["warning"].startswith(
        "the gateways last loaded v1, not version 2: they failed to load it and keep the last "
        "good chain ("
    )
    assert MODULE in shown["warning"]
    # Once every environment's latest load is the parameter's version, no warning.
    loaded = {**loads[0], "chain_version": loads[0]["chain_version"].replace("v1:", "v2:")}
    _put_lines(group, "2026/01/01/[$LATEST]one", [loaded], later_ms=60_000)
    _put_lines(group, "2026/01/01/[$LATEST]two", [loaded], later_ms=60_000)
    again = status_of(cli("policy", "show", "--stack", STACK, "--region", "us-east-1"))
    assert again["gateways_loaded"] == {
        "environments": 2,
        "versions": {"v2": 2},
        "kept_last_good": 0,
    }
    assert "warning" not in again
