"""`policy-gateway` as operators use it: flag, policy and budget commands against moto,
and `serve` with the first-run stand-ins. tests/test_cli_stack.py: the same with --stack."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anthropic
import anyio
import boto3
import pytest
from policy_gateway import settings
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.cli.main import build_parser
from policy_gateway.fallback.budget_table import DynamoDBStore, create_table, window_start
from policy_gateway.local.standins import LOCAL_FALLBACK_BUDGET_TABLE
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from .support.cli import cli, status_of
from .support.clock import eventually
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.sdk import REPLACE, ask_text, sdk
from .support.servers import ROOT, free_port, gateway_process, serving


def test_flag_on_off_status(ssm: Any) -> None:
    assert cli("init").returncode == 0
    on = status_of(cli("flag", "on"))
    assert on["value"] == "true"
    assert on["fallback_enabled"] is True
    assert on["parameter"] == settings.DEFAULT_FLAG_PARAMETER
    assert on["version"] == 2
    assert 0 < on["seen_by_running_gateways_within_seconds"] <= settings.DEFAULT_FLAG_TTL
    off = status_of(cli("flag", "off"))
    assert off["value"] == "false"
    assert off["version"] == on["version"] + 1
    status = status_of(cli("flag", "status"))
    assert status["fallback_enabled"] is False
    assert status["last_modified"] == off["last_modified"]
    stored = ssm.get_parameter(Name=settings.DEFAULT_FLAG_PARAMETER)["Parameter"]["Value"]
    assert stored == "false"


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    return line


def test_flag_status_without_the_parameter_fails_cleanly() -> None:
    line = _one_line(cli("flag", "status"))
    assert f"SSM parameter {settings.DEFAULT_FLAG_PARAMETER} (the fallback flag" in line
    assert "does not exist; run `policy-gateway init`" in line


def test_a_mistyped_flag_parameter_is_refused_and_nothing_is_created(ssm: Any) -> None:
    """The issue's case: a typo once created a new parameter while the real flag stayed on."""
    assert cli("init").returncode == 0
    status_of(cli("flag", "on"))
    typo = "/policy-gatway/passthrough-fallback-enabled"
    line = _one_line(cli("flag", "off", env={settings.ENV_FLAG_PARAMETER: typo}))
    assert f"SSM parameter {typo} (the fallback flag, named by this shell's environment" in line
    assert line.endswith(
        f"did you mean {settings.DEFAULT_FLAG_PARAMETER}? set {settings.ENV_FLAG_PARAMETER} to it"
    )
    # The advice the issue found creating the typo: init refuses a name nothing uses.
    refused = cli("init", env={settings.ENV_FLAG_PARAMETER: typo})
    assert refused.returncode == 2
    assert _one_line(refused) == (
        f"policy-gateway init: {settings.ENV_FLAG_PARAMETER}={typo} is neither a default name "
        f"nor a stack's; nothing created; did you mean {settings.DEFAULT_FLAG_PARAMETER}?"
    )
    names = [p["Name"] for p in ssm.describe_parameters()["Parameters"]]
    assert typo not in names
    real = ssm.get_parameter(Name=settings.DEFAULT_FLAG_PARAMETER)["Parameter"]
    assert (real["Value"], real["Version"]) == ("true", 2)


def test_init_creates_a_name_of_its_own_only_when_told(ssm: Any) -> None:
    own = {settings.ENV_POLICY_CONFIG_PARAMETER: "/team-a/gateway/chain"}
    refused = cli("init", env=own)
    assert "pass --custom-names to create it" in _one_line(refused)
    assert ssm.describe_parameters()["Parameters"] == []
    missing = _one_line(cli("policy", "show", env=own))
    assert "run `policy-gateway init --custom-names` to create this name" in missing
    created = cli("init", "--custom-names", env=own)
    assert created.returncode == 0, created.stderr
    assert "created  /team-a/gateway/chain" in created.stdout
    assert status_of(cli("policy", "show", env=own))["document"] == {"policies": []}


def test_policy_set_and_show_before_init_refuse_with_the_next_step(
    tmp_path: Path, ssm: Any
) -> None:
    chain = tmp_path / "chain.json"
    chain.write_text(REPLACE)
    for args in (("policy", "show"), ("policy", "set", str(chain)), ("policy", "diff", str(chain))):
        line = _one_line(cli(*args))
        assert f"SSM parameter {settings.DEFAULT_POLICY_CONFIG_PARAMETER} (the policy chain" in line
        assert line.endswith(
            "run `policy-gateway init` (or pass --stack NAME to use a deployed stack's names)"
        )
    assert ssm.describe_parameters()["Parameters"] == []


def test_policy_set_of_an_empty_chain_says_what_it_means(tmp_path: Path, ssm: Any) -> None:
    assert cli("init").returncode == 0
    empty = tmp_path / "empty.json"
    empty.write_text('{"policies": []}')
    result = cli("policy", "set", str(empty))
    written = status_of(result)
    assert written["version"] == 2
    assert (
        f"wrote {settings.DEFAULT_POLICY_CONFIG_PARAMETER} version 2: an empty chain: "
        "no policy runs, requests go upstream unchanged"
    ) in result.stderr
    assert "-" not in result.stderr.split(": ", 1)[1].split("version 2")[0]


def test_policy_validate_needs_no_aws(tmp_path: Path, ssm: Any) -> None:
    good = tmp_path / "chain.json"
    good.write_text(REPLACE)
    broken_aws = {"AWS_ENDPOINT_URL_SSM": "http://127.0.0.1:9"}
    result = cli("policy", "validate", str(good), env=broken_aws)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{good}: 1 policies: string_replace"
    bad = tmp_path / "bad.json"
    bad.write_text('{"policies": [{"policy": "no_such_policy"}]}')
    refused = cli("policy", "validate", str(bad), env=broken_aws)
    assert refused.returncode == 2
    assert f"{bad} is not a valid policy chain" in _one_line(refused)
    assert "no_such_policy" in refused.stderr
    missing = _one_line(cli("policy", "validate", str(tmp_path / "absent.json")))
    assert f"cannot read {tmp_path / 'absent.json'}" in missing


def test_policy_diff_compares_with_the_live_chain(tmp_path: Path, ssm: Any) -> None:
    assert cli("init").returncode == 0
    live = tmp_path / "live.json"
    live.write_text(REPLACE)
    status_of(cli("policy", "set", str(live)))
    reordered = tmp_path / "same.json"
    reordered.write_text(json.dumps(json.loads(REPLACE), indent=4, sort_keys=True))
    same = cli("policy", "diff", str(reordered))
    assert same.returncode == 0, same.stderr
    label = f"{settings.DEFAULT_POLICY_CONFIG_PARAMETER} (version 2)"
    assert same.stdout.strip() == f"no change: {reordered} matches {label}"
    changed = tmp_path / "changed.json"
    changed.write_text('{"policies": []}')
    diff = cli("policy", "diff", str(changed))
    assert diff.returncode == 0, diff.stderr
    lines = diff.stdout.splitlines()
    assert lines[:2] == [f"--- {label}", f"+++ {changed}"]
    assert '+  "policies": []' in lines
    assert any(line.startswith('-      "policy": "string_replace"') for line in lines)
    stored = ssm.get_parameter(Name=settings.DEFAULT_POLICY_CONFIG_PARAMETER)["Parameter"]
    assert (stored["Value"], stored["Version"]) == (REPLACE, 2)


def test_budget_top_lists_the_callers_with_most_fallbacks(budget_table: str) -> None:
    window = 86400
    now = time.time()
    start = window_start(now, window)
    store = DynamoDBStore(budget_table)
    spent = {"key:aaaa": 3, "team-b": 1, "arn:aws:iam::123456789012:role/c": 5}
    for caller, times in spent.items():
        for _ in range(times):
            assert anyio.run(store.spend, caller, start, 10, start + 2 * window)
    # The previous window's counts are not this window's.
    for _ in range(9):
        anyio.run(store.spend, "old-caller", start - window, 10, start + window)
    env = {
        settings.ENV_FALLBACK_BUDGET_TABLE: budget_table,
        settings.ENV_FALLBACK_BUDGET_WINDOW: str(window),
    }
    top = status_of(cli("budget", "top", "--limit", "2", env=env))
    assert top["table"] == budget_table
    assert [(c["caller"], c["used"], c["remaining"]) for c in top["callers"]] == [
        ("arn:aws:iam::123456789012:role/c", 5, 5),
        ("key:aaaa", 3, 7),
    ]
    everyone = status_of(cli("budget", "top", env=env))
    assert [c["caller"] for c in everyone["callers"]] == [
        "arn:aws:iam::123456789012:role/c",
        "key:aaaa",
        "team-b",
    ]


def test_budget_refuses_a_table_that_does_not_exist(budget_table: str) -> None:
    typo = budget_table + "-typo"
    for what in ("key:0123456789abcdef", "top"):
        line = _one_line(cli("budget", what, env={settings.ENV_FALLBACK_BUDGET_TABLE: typo}))
        assert f"DynamoDB table {typo} (FALLBACK_BUDGET_TABLE, named by this shell's" in line
    assert boto3.client("dynamodb").list_tables()["TableNames"] == [budget_table]


def test_version_is_the_installed_package_version() -> None:
    result = cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"policy-gateway {version('policy-gateway')}"


def test_running_gateway_sees_the_cli_toggle_within_the_ttl(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str
) -> None:
    assert cli("init").returncode == 0
    env = {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_POLICY_CONFIG: REPLACE,
        settings.ENV_FLAG_TTL: "1",
        "PYTHONPATH": str(ROOT),
    }
    with gateway_process(env) as (url, _):
        client = sdk(url)
        upstream.script(Reply.error(400, "invalid_request_error"))
        with pytest.raises(anthropic.BadRequestError):
            ask_text(client)
        status_of(cli("flag", "on", env={settings.ENV_FLAG_TTL: "1"}))
        # A child process: no clock to advance, so ask until the flag's TTL has passed.

        def fell_back() -> bool:
            upstream.script(Reply.error(400, "invalid_request_error"))
            try:
                return ask_text(client).startswith("echo:")
            except anthropic.BadRequestError:
                return False

        eventually(fell_back, timeout=5, interval=0.1)
    policy_changed, original = (str(r.json["messages"]) for r in upstream.requests[-2:])
    assert "[codename]" in policy_changed
    assert "secret-project" in original


def test_policy_set_validates_then_writes_and_show_reads(tmp_path: Path, ssm: Any) -> None:
    assert cli("init").returncode == 0
    good = tmp_path / "chain.json"
    good.write_text(REPLACE)
    written = status_of(cli("policy", "set", str(good)))
    assert written["parameter"] == settings.DEFAULT_POLICY_CONFIG_PARAMETER
    assert written["document"] == json.loads(REPLACE)
    bad = tmp_path / "bad.json"
    bad.write_text('{"policies": [{"policy": "no_such_policy"}]}')
    refused = cli("policy", "set", str(bad))
    assert refused.returncode == 2
    assert "no_such_policy" in refused.stderr
    shown_text = cli("policy", "show")
    shown = status_of(shown_text)
    # The document itself, printed as JSON is read: not one escaped string.
    assert shown["document"] == json.loads(REPLACE)
    assert "value" not in shown
    assert '\\"' not in shown_text.stdout
    assert '    "policies": [' in shown_text.stdout
    assert shown["version"] == 2
    assert shown["gateway_ttl_seconds"] == settings.DEFAULT_POLICY_CONFIG_TTL


# A model the simulator serves, which the chain rewrites to one it does not (a 404).
RETIRING = "claude-haiku-4-5"


def ask_retiring(client: anthropic.Anthropic) -> str:
    reply = client.messages.create(
        model=RETIRING, max_tokens=20, messages=[{"role": "user", "content": "TICKET-REF-0042"}]
    )
    return "".join(block.text for block in reply.content if block.type == "text")


def test_serve_with_first_run_stand_ins_needs_no_aws_and_no_key(tmp_path: Path) -> None:
    """The README's first command: built-in simulator and embedded SSM."""
    ssm_port = free_port()
    env = {
        "PYTHONPATH": str(ROOT),
        settings.ENV_POLICY_CONFIG: json.dumps(
            {
                "policies": [
                    {
                        "policy": "rewrite_model",
                        "options": {"map": {RETIRING: "claude-instant-1.2"}},
                    }
                ]
            }
        ),
        settings.ENV_FLAG_TTL: "0",
    }
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k != settings.ENV_UPSTREAM_BASE_URL
    }
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(ssm_port)]
    log = tmp_path / "serve.log"
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(clean)
    try:
        with gateway_process(env, stdout_path=log, serve_args=serve_args) as (url, _):
            client = sdk(url)
            reply = client.messages.create(
                model=MODEL, max_tokens=20, messages=[{"role": "user", "content": "hello"}]
            )
            assert "hello" in reply.content[0].text  # type: ignore[union-attr]
            with pytest.raises(anthropic.NotFoundError):
                ask_retiring(client)
            local_ssm = {
                "AWS_ENDPOINT_URL_SSM": f"http://127.0.0.1:{ssm_port}",
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
            }
            assert status_of(cli("flag", "on", env=local_ssm))["fallback_enabled"] is True
            assert "TICKET-REF-0042" in ask_retiring(client)
            # The stand-in serves the fallback budget's table too: the fallback was counted.
            local_budget = {
                **local_ssm,
                "AWS_ENDPOINT_URL_DYNAMODB": local_ssm["AWS_ENDPOINT_URL_SSM"],
                settings.ENV_FALLBACK_BUDGET_TABLE: LOCAL_FALLBACK_BUDGET_TABLE,
            }
            caller = key_caller(b"sk-ant-test-key")
            used = status_of(cli("budget", caller, env=local_budget))
            assert (used["caller"], used["used"], used["remaining"]) == (caller, 1, 9)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    printed = log.read_text()
    assert "upstream simulator: http://127.0.0.1:" in printed
    assert f"embedded SSM: http://127.0.0.1:{ssm_port}" in printed
    assert f"embedded DynamoDB: http://127.0.0.1:{ssm_port}" in printed
    assert (
        "fallback budget: 10 per caller per 3600 s, in DynamoDB table "
        f"{LOCAL_FALLBACK_BUDGET_TABLE}, shared by every instance"
    ) in printed
    assert '"PassthroughFallback":[1.0]' in printed


def test_configured_endpoints_are_never_replaced_by_stand_ins(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, moto_endpoint: str
) -> None:
    env = {
        "PYTHONPATH": str(ROOT),
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
    }
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    log = tmp_path / "serve.log"
    with gateway_process(env, stdout_path=log, serve_args=serve_args) as (url, _):
        assert ask_text(sdk(url)).startswith("echo:")
    assert len(upstream.requests) == 1
    printed = log.read_text()
    assert "not starting the upstream simulator" in printed
    assert "not starting the embedded SSM" in printed
    assert f"-> the Anthropic API at {upstream_url}" in printed
    assert "fallback budget: 10 per caller per 3600 s, kept in this process" in printed


def test_budget_without_a_table_says_where_the_budget_is() -> None:
    result = cli("budget", "key:0123456789abcdef", env={settings.ENV_FALLBACK_BUDGET_TABLE: ""})
    assert result.returncode == 2
    assert "each gateway process keeps its own fallback budget" in result.stderr


def test_budget_zero_is_announced_at_start(tmp_path: Path, upstream_url: str) -> None:
    env = {
        "PYTHONPATH": str(ROOT),
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_FALLBACK_BUDGET: "0",
    }
    log = tmp_path / "serve.log"
    with gateway_process(env, stdout_path=log):
        pass
    assert "FALLBACK_BUDGET=0, the fallback never fires" in log.read_text()


def test_policy_validate_diff_and_show_display_a_callers_chain(tmp_path: Path, ssm: Any) -> None:
    document = {
        "policies": [{"policy": "noop"}],
        "callers": {
            "bob": {"policies": [{"policy": "cap_max_tokens", "options": {"max": 10}}]},
            "group:contractors": {
                "policies": [
                    {"policy": "strip_tools", "options": {"names": ["bash"]}},
                    {"policy": "noop", "mode": "shadow"},
                ]
            },
        },
    }
    path = tmp_path / "document.json"
    path.write_text(json.dumps(document))
    checked = cli(
        "policy", "validate", str(path), "--caller", "alice", "--groups", "interns,contractors"
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == [
        f"{path}: 1 policies: noop; callers: bob, group:contractors",
        "alice (groups: interns, contractors) gets the 'group:contractors' chain:"
        " 1 policies: strip_tools; shadow: noop",
    ]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**document, "callers": {"bob": {"policies": [{"policy": "nope"}]}}}))
    refused = cli("policy", "validate", str(bad))
    assert refused.returncode == 2
    assert "callers['bob'].policies[0]" in _one_line(refused)
    assert cli("init").returncode == 0
    diffed = cli("policy", "diff", str(path), "--caller", "bob")
    assert diffed.returncode == 0, diffed.stderr
    assert diffed.stdout.splitlines()[-1] == (
        f"with {path}, bob gets the 'bob' chain: 1 policies: cap_max_tokens"
    )
    status_of(cli("policy", "set", str(path)))
    shown = status_of(cli("policy", "show", "--caller", "bob"))
    assert shown["resolution"] == {
        "caller": "bob",
        "groups": [],
        "chain": "bob",
        "policies": ["cap_max_tokens"],
        "shadow": [],
    }
    grouped = status_of(cli("policy", "show", "--caller", "zed", "--groups", "contractors"))
    assert grouped["resolution"]["chain"] == "group:contractors"
    assert grouped["resolution"]["shadow"] == ["noop"]
    assert status_of(cli("policy", "show", "--caller", "zed"))["resolution"]["chain"] == "default"


# Not the session's us-east-1, so a command that read another source would find nothing.
OTHER_REGION = "eu-west-2"
BUDGET = "region-test-budget"


def _region_from(source: str, tmp_path: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """The environment that names OTHER_REGION through `source` alone, and what to unset."""
    both = ("AWS_REGION", "AWS_DEFAULT_REGION")
    if source == "profile":
        config = tmp_path / "aws-config"
        config.write_text(f"[default]\nregion = {OTHER_REGION}\n")
        return {"AWS_CONFIG_FILE": str(config)}, both
    if source == "AWS_REGION over AWS_DEFAULT_REGION":
        return {"AWS_REGION": OTHER_REGION, "AWS_DEFAULT_REGION": "us-east-1"}, ()
    return {source: OTHER_REGION}, tuple(name for name in both if name != source)


@pytest.mark.parametrize(
    "source", ["AWS_REGION", "AWS_DEFAULT_REGION", "profile", "AWS_REGION over AWS_DEFAULT_REGION"]
)
def test_every_command_takes_the_region_as_the_sdks_do(
    source: str, tmp_path: Path, moto_endpoint: str
) -> None:
    """One rule for init, flag, policy, budget (and doctor: tests/test_doctor.py)."""
    env, unset = _region_from(source, tmp_path)
    created = cli("init", env=env, unset=unset)
    assert created.returncode == 0, created.stderr
    ssm = boto3.client("ssm", region_name=OTHER_REGION)
    assert ssm.get_parameter(Name=settings.DEFAULT_FLAG_PARAMETER)["Parameter"]["Value"] == "false"
    assert status_of(cli("flag", "on", env=env, unset=unset))["fallback_enabled"] is True
    assert status_of(cli("policy", "show", env=env, unset=unset))["document"] == {"policies": []}
    create_table(boto3.client("dynamodb", region_name=OTHER_REGION), BUDGET)
    table = {**env, settings.ENV_FALLBACK_BUDGET_TABLE: BUDGET}
    assert status_of(cli("budget", "someone", env=table, unset=unset))["table"] == BUDGET


def test_no_region_anywhere_says_how_to_set_one(tmp_path: Path) -> None:
    empty = tmp_path / "aws-config"
    empty.write_text("")
    result = cli(
        "flag",
        "status",
        env={"AWS_CONFIG_FILE": str(empty)},
        unset=("AWS_REGION", "AWS_DEFAULT_REGION"),
    )
    assert (
        _one_line(result)
        == "policy-gateway flag: no AWS region set; pass --region or set AWS_REGION"
    )


def test_policy_help_describes_its_actions_and_every_region_option_has_help() -> None:
    shown = cli("policy", "--help")
    assert shown.returncode == 0
    for action in ("show ", "validate FILE", "diff FILE", "set FILE"):
        assert f"\n  {action}" in shown.stdout
    for command in ("flag", "policy", "init", "doctor", "budget"):
        text = " ".join(cli(command, "--help").stdout.split())
        assert "--region REGION AWS region (default: AWS_REGION, then AWS_DEFAULT_REGION" in text


def _commands(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, Any]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield from _commands(command, f"{path} {name}")
        else:
            yield path, action


def test_every_option_and_argument_of_every_command_says_what_it_is() -> None:
    """`--help` is the operator's first reference: `keys rotate --help` showed a bare `name`."""
    bare = [
        f"{path}: {'/'.join(action.option_strings) or action.dest}"
        for path, action in _commands(build_parser(), "policy-gateway")
        if not action.help
    ]
    assert bare == []


def _web_page(request: Request) -> Response:
    # What `make run`'s stand-in answers for a service it cannot serve (werkzeug's 500).
    return HTMLResponse(
        "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n", 500
    )


@pytest.mark.parametrize("command", [("doctor",), ("flag", "status"), ("policy", "show")])
def test_an_endpoint_that_is_not_aws_is_one_line_never_its_page(command: tuple[str, ...]) -> None:
    page = Starlette(routes=[Route("/{path:path}", _web_page, methods=["GET", "POST"])])
    with serving(page) as server:
        result = cli(
            *command,
            "--stack",
            "policy-gateway",
            env={"AWS_ENDPOINT_URL_CLOUDFORMATION": server.url},
        )
    line = _one_line(result)
    assert "<" not in line
    assert "not an AWS response" in line
    assert "--stack and doctor need a deployed stack" in line
