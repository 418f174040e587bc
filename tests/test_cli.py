"""`policy-gateway` as operators use it: flag and policy commands against moto SSM,
and `serve` with the first-run stand-ins."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anthropic
import pytest
from policy_gateway import settings
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.cli.main import LOCAL_FALLBACK_BUDGET_TABLE

from .support.cli import cli, status_of
from .support.clock import eventually
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.sdk import REPLACE, ask_text, sdk
from .support.servers import ROOT, free_port, gateway_process


def test_flag_on_off_status(ssm: Any) -> None:
    on = status_of(cli("flag", "on"))
    assert on["value"] == "true"
    assert on["fallback_enabled"] is True
    assert on["parameter"] == settings.DEFAULT_FLAG_PARAMETER
    assert 0 < on["seen_by_running_gateways_within_seconds"] <= settings.DEFAULT_FLAG_TTL
    off = status_of(cli("flag", "off"))
    assert off["value"] == "false"
    assert off["version"] == on["version"] + 1
    status = status_of(cli("flag", "status"))
    assert status["fallback_enabled"] is False
    assert status["last_modified"] == off["last_modified"]
    stored = ssm.get_parameter(Name=settings.DEFAULT_FLAG_PARAMETER)["Parameter"]["Value"]
    assert stored == "false"


def test_flag_status_without_the_parameter_fails_cleanly() -> None:
    result = cli("flag", "status")
    assert result.returncode == 1
    assert "ParameterNotFound" in result.stderr
    assert "Traceback" not in result.stderr


def test_running_gateway_sees_the_cli_toggle_within_the_ttl(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str
) -> None:
    cli("flag", "off")
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
    good = tmp_path / "chain.json"
    good.write_text(REPLACE)
    written = status_of(cli("policy", "set", str(good)))
    assert written["parameter"] == settings.DEFAULT_POLICY_CONFIG_PARAMETER
    assert json.loads(written["value"]) == json.loads(REPLACE)
    bad = tmp_path / "bad.json"
    bad.write_text('{"policies": [{"policy": "no_such_policy"}]}')
    refused = cli("policy", "set", str(bad))
    assert refused.returncode == 2
    assert "no_such_policy" in refused.stderr
    shown = status_of(cli("policy", "show"))
    assert json.loads(shown["value"]) == json.loads(REPLACE)
    assert shown["version"] == 1


def test_serve_with_first_run_stand_ins_needs_no_aws_and_no_key(tmp_path: Path) -> None:
    """The README's first command: built-in simulator and embedded SSM."""
    ssm_port = free_port()
    env = {
        "PYTHONPATH": str(ROOT),
        settings.ENV_POLICY_CONFIG: json.dumps(
            {
                "policies": [
                    {
                        "policy": "string_replace",
                        "options": {"replacements": [["TICKET-REF-0042", ""]]},
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
            with pytest.raises(anthropic.BadRequestError):
                ask_text(client, text="TICKET-REF-0042")
            local_ssm = {
                "AWS_ENDPOINT_URL_SSM": f"http://127.0.0.1:{ssm_port}",
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
            }
            assert status_of(cli("flag", "on", env=local_ssm))["fallback_enabled"] is True
            assert "TICKET-REF-0042" in ask_text(client, text="TICKET-REF-0042")
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
    assert f"-> {upstream_url}" in printed
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


def test_policy_validate_and_show_display_a_callers_chain(tmp_path: Path, ssm: Any) -> None:
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
    checked = status_of(
        cli("policy", "validate", str(path), "--caller", "alice", "--groups", "interns,contractors")
    )
    assert [chain["chain"] for chain in checked["chains"]] == [
        "default",
        "bob",
        "group:contractors",
    ]
    assert checked["resolution"] == {
        "caller": "alice",
        "groups": ["interns", "contractors"],
        "chain": "group:contractors",
        "policies": ["strip_tools"],
        "shadow": ["noop"],
    }
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**document, "callers": {"bob": {"policies": [{"policy": "nope"}]}}}))
    refused = cli("policy", "validate", str(bad))
    assert refused.returncode == 2
    assert "callers['bob'].policies[0]" in refused.stderr
    status_of(cli("policy", "set", str(path)))
    shown = status_of(cli("policy", "show", "--caller", "bob"))
    assert shown["resolution"]["chain"] == "bob"
    assert status_of(cli("policy", "show", "--caller", "zed"))["resolution"]["chain"] == "default"
