"""`--stack NAME`: the operator commands take every name and TTL from the stack's function.

The stack is moto's (tests/support/stack.py), with the function's environment
template.yaml gives it; nothing is typed by hand, and the default names of a
gateway started in this shell are never touched.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
from policy_gateway import settings
from policy_gateway.fallback.budget_table import create_table

from .support.cli import cli, status_of
from .support.sdk import REPLACE
from .support.stack import create_gateway_stack, gateway_environment

STACK = "gw-cli"
TABLE = "gw-cli-fallback-budget"
# Not the template's 30 s, so the answer can only have come from the stack.
STACK_FLAG_TTL = "7"


@pytest.fixture
def stack() -> dict[str, str]:
    environment = {
        **gateway_environment(STACK),
        settings.ENV_FLAG_TTL: STACK_FLAG_TTL,
        # The rendered table name is a placeholder (`<stack>/<LogicalId>`), not a table name.
        settings.ENV_FALLBACK_BUDGET_TABLE: TABLE,
    }
    create_gateway_stack(STACK, environment)
    return environment


def on_stack(*args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, "--stack", STACK, "--region", "us-east-1")


def test_flag_with_stack_uses_its_parameter_and_reports_its_ttl(
    stack: dict[str, str], ssm: Any
) -> None:
    flag_name = stack[settings.ENV_FLAG_PARAMETER]
    assert flag_name == f"/{STACK}/passthrough-fallback-enabled"
    refused = on_stack("flag", "on")
    assert refused.returncode == 1
    assert (
        f"SSM parameter {flag_name} (the fallback flag, named by stack {STACK}'s function "
        f"environment) does not exist; run `policy-gateway init --stack {STACK} --region "
        "us-east-1`"
    ) in refused.stderr
    assert on_stack("init").returncode == 0
    on = status_of(on_stack("flag", "on"))
    assert (on["parameter"], on["value"], on["fallback_enabled"]) == (flag_name, "true", True)
    assert on["gateway_ttl_seconds"] == float(STACK_FLAG_TTL)
    assert on["gateway_ttl_from"] == (
        f"{settings.ENV_FLAG_TTL} in stack {STACK}'s function environment"
    )
    assert 0 < on["seen_by_running_gateways_within_seconds"] <= float(STACK_FLAG_TTL)
    assert ssm.get_parameter(Name=flag_name)["Parameter"]["Value"] == "true"
    names = [p["Name"] for p in ssm.describe_parameters()["Parameters"]]
    assert settings.DEFAULT_FLAG_PARAMETER not in names


def test_flag_status_without_stack_labels_the_ttl_as_this_shells(ssm: Any) -> None:
    assert cli("init").returncode == 0
    shell = status_of(cli("flag", "status", env={settings.ENV_FLAG_TTL: "12"}))
    assert shell["gateway_ttl_seconds"] == 12
    assert shell["gateway_ttl_from"].startswith(f"{settings.ENV_FLAG_TTL} in this shell's")
    unset = status_of(cli("flag", "status", unset=(settings.ENV_FLAG_TTL,)))
    assert unset["gateway_ttl_seconds"] == settings.DEFAULT_FLAG_TTL
    assert unset["gateway_ttl_from"] == (
        f"the gateway's default: {settings.ENV_FLAG_TTL} is not set in this shell's environment "
        "(pass --stack NAME for a deployed gateway's)"
    )


def test_policy_with_stack_sets_and_diffs_its_chain(
    stack: dict[str, str], ssm: Any, tmp_path: Path
) -> None:
    chain_name = stack[settings.ENV_POLICY_CONFIG_PARAMETER]
    assert on_stack("init").returncode == 0
    chain = tmp_path / "chain.json"
    chain.write_text(REPLACE)
    assert on_stack("policy", "diff", str(chain)).stdout.startswith(f"--- {chain_name} (version 1)")
    written = status_of(on_stack("policy", "set", str(chain)))
    assert (written["parameter"], written["document"]) == (chain_name, json.loads(REPLACE))
    assert written["gateway_ttl_from"] == (
        f"{settings.ENV_POLICY_CONFIG_TTL} in stack {STACK}'s function environment"
    )
    names = [p["Name"] for p in ssm.describe_parameters()["Parameters"]]
    assert settings.DEFAULT_POLICY_CONFIG_PARAMETER not in names


def test_budget_with_stack_reads_its_table(stack: dict[str, str]) -> None:
    refused = on_stack("budget", "top")
    assert refused.returncode == 1
    assert f"DynamoDB table {TABLE} (FALLBACK_BUDGET_TABLE, named by stack {STACK}'s" in (
        refused.stderr
    )
    create_table(boto3.client("dynamodb"), TABLE)
    used = status_of(on_stack("budget", "key:0123456789abcdef"))
    assert (used["table"], used["used"], used["limit"]) == (
        TABLE,
        0,
        int(stack[settings.ENV_FALLBACK_BUDGET]),
    )
    assert status_of(on_stack("budget", "top")) == {"table": TABLE, "callers": []}


def test_an_unknown_stack_is_one_line() -> None:
    result = cli("flag", "status", "--stack", "no-such-stack", "--region", "us-east-1")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "policy-gateway flag: stack no-such-stack not found; check --stack and --region "
        "(sam list stack-outputs)"
    )


def test_init_secrets_with_a_stack_is_refused_before_anything_is_created(
    stack: dict[str, str], ssm: Any
) -> None:
    result = on_stack("init", "--secrets")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("policy-gateway init: --secrets is for a run without a stack")
    assert ssm.describe_parameters()["Parameters"] == []
    assert boto3.client("secretsmanager").list_secrets()["SecretList"] == []
