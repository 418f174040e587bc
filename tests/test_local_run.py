"""`make run`'s stand-ins cover every mode: busy ports, a simulated tool call through a real
tool policy, a simulated Bedrock, gateway keys from the embedded Secrets Manager, and the
chain read from the stand-in's SSM parameter."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import boto3
import httpx2
import pytest
from policy_gateway import settings
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.auth.gateway_keys import key_digest
from policy_gateway.aws_reads import READ_TIMEOUT_SECONDS
from policy_gateway.local import standins
from policy_gateway.local.bedrock_simulator import create_bedrock_simulator
from policy_gateway.local.simulated_reply import TOOL_TRIGGER
from policy_gateway.local.simulator import create_simulator

from .support.aws import AWSProxy
from .support.cli import cli
from .support.clock import eventually
from .support.gateway import GatewayFactory
from .support.sdk import client, sdk
from .support.servers import ROOT, ThreadedServer, free_port, gateway_process, serving

MODEL = "claude-sonnet-4-6"
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
BLOCK_RM = json.dumps(
    {
        "policies": [
            {
                "policy": "block_tool_calls",
                "options": {"rules": [{"tool": "^bash$", "input": "rm"}]},
            }
        ]
    }
)
DANGEROUS = f'{TOOL_TRIGGER} bash {{"command": "rm -rf /"}}'
HARMLESS = f'{TOOL_TRIGGER} bash {{"command": "ls"}}'


@pytest.fixture
def no_aws_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    """A laptop with nothing configured: the session's moto endpoints and upstream unset."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name == settings.ENV_UPSTREAM_BASE_URL:
            monkeypatch.delenv(name)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another process listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _this_tree() -> str:
    """PYTHONPATH for a child that must run this checkout's code and import `tests`."""
    return os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policy_gateway", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )


def _stand_ins(gateway_port: int, ssm_port: int) -> list[str]:
    return [
        "--simulate-upstream",
        "--embedded-ssm",
        "--port",
        str(gateway_port),
        "--embedded-ssm-port",
        str(ssm_port),
    ]


@pytest.mark.usefixtures("no_aws_configured")
@pytest.mark.parametrize("busy", ["gateway", "ssm"])
def test_a_busy_port_is_one_line_and_a_non_zero_exit_before_anything_is_announced(
    held_port: int, busy: str
) -> None:
    gateway_port, ssm_port = (
        (held_port, free_port()) if busy == "gateway" else (free_port(), held_port)
    )
    result = _serve(*_stand_ins(gateway_port, ssm_port))
    assert result.returncode != 0
    printed = (result.stdout + result.stderr).strip().splitlines()
    option = "make run PORT=" if busy == "gateway" else "make run SSM_PORT="
    assert len(printed) == 1, printed
    assert f"port 127.0.0.1:{held_port} is in use" in printed[0]
    assert option in printed[0]


def _tool_calls(reply: Any) -> list[tuple[str, Any]]:
    return [(block.name, block.input) for block in reply.content if block.type == "tool_use"]


def _text(reply: Any) -> str:
    return "".join(block.text for block in reply.content if block.type == "text")


def _ask(sdk_client: anthropic.Anthropic, text: str, streaming: bool, model: str = MODEL) -> Any:
    request: dict[str, Any] = {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
    }
    if streaming:
        with sdk_client.messages.stream(**request) as stream:
            return stream.get_final_message()
    return sdk_client.messages.create(**request)


@pytest.fixture
def simulator() -> Iterator[ThreadedServer]:
    with serving(create_simulator()) as server:
        yield server


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
def test_the_simulator_s_tool_call_is_blocked_by_block_tool_calls(
    make_gateway: GatewayFactory, simulator: ThreadedServer, streaming: bool
) -> None:
    url = make_gateway(upstream_base_url=simulator.url, policy_config=BLOCK_RM)
    allowed = _ask(sdk(url), HARMLESS, streaming)
    assert allowed.stop_reason == "tool_use"
    assert _tool_calls(allowed) == [("bash", {"command": "ls"})]
    blocked = _ask(sdk(url), DANGEROUS, streaming)
    assert _tool_calls(blocked) == []
    assert "block_tool_calls" in _text(blocked)
    assert "bash" in _text(blocked)


def test_a_malformed_tool_trigger_is_the_api_s_400(simulator: ThreadedServer) -> None:
    with pytest.raises(anthropic.BadRequestError, match="JSON object"):
        _ask(sdk(simulator.url), f"{TOOL_TRIGGER} bash not-json", streaming=False)


def test_the_simulator_refuses_empty_content_as_the_api_does(simulator: ThreadedServer) -> None:
    simulated = sdk(simulator.url)
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.0: all messages must have"):
        simulated.messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": ""}]
        )
    prefill = simulated.messages.create(
        model=MODEL,
        max_tokens=16,
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}],
    )
    assert prefill.content


@pytest.fixture
def bedrock_simulator() -> Iterator[ThreadedServer]:
    with serving(create_bedrock_simulator()) as server:
        yield server


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
def test_the_bedrock_simulator_answers_through_the_gateway(
    make_gateway: GatewayFactory, bedrock_simulator: ThreadedServer, streaming: bool
) -> None:
    url = make_gateway(
        upstream_provider=settings.PROVIDER_BEDROCK,
        bedrock_region="us-east-1",
        bedrock_endpoint_url=bedrock_simulator.url,
        policy_config=BLOCK_RM,
    )
    echoed = _ask(sdk(url), "hello bedrock", streaming, model=BEDROCK_MODEL)
    assert "hello bedrock" in _text(echoed)
    assert echoed.model == BEDROCK_MODEL
    called = _ask(sdk(url), HARMLESS, streaming, model=BEDROCK_MODEL)
    assert _tool_calls(called) == [("bash", {"command": "ls"})]
    blocked = _ask(sdk(url), DANGEROUS, streaming, model=BEDROCK_MODEL)
    assert _tool_calls(blocked) == []
    assert "block_tool_calls" in _text(blocked)
    counted = sdk(url).messages.count_tokens(
        model=BEDROCK_MODEL, messages=[{"role": "user", "content": "hello"}]
    )
    assert counted.input_tokens > 0


def test_the_bedrock_simulator_refuses_what_bedrock_refuses(
    bedrock_simulator: ThreadedServer,
) -> None:
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 8, "messages": []}
    unsigned = httpx2.post(f"{bedrock_simulator.url}/model/{BEDROCK_MODEL}/invoke", json=body)
    assert unsigned.status_code == 403
    assert unsigned.headers["x-amzn-errortype"].startswith("UnrecognizedClientException")


@pytest.mark.usefixtures("no_aws_configured")
def test_simulated_bedrock_never_calls_aws_and_the_banner_says_so(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    env = {
        settings.ENV_UPSTREAM_PROVIDER: settings.PROVIDER_BEDROCK,
        settings.ENV_AUTH_MODE: settings.AUTH_PASSTHROUGH,
        "PYTHONPATH": str(ROOT),
    }
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    with gateway_process(env, stdout_path=log, serve_args=serve_args) as (url, _):
        assert "hello" in _text(_ask(sdk(url), "hello", streaming=True, model=BEDROCK_MODEL))
    printed = log.read_text()
    simulated = re.search(r"Bedrock simulator: (http://127\.0\.0\.1:\d+)", printed)
    assert simulated is not None, printed
    assert f"-> Amazon Bedrock (us-east-1), simulated at {simulated.group(1)}" in printed
    assert "api.anthropic.com" not in printed
    assert "upstream simulator:" not in printed


def _operator_env(printed: str) -> dict[str, str]:
    """The `export ...` line the banner prints for another shell, as a dict."""
    line = re.search(r"in another shell: export (.+)", printed)
    assert line is not None, printed
    return dict(pair.split("=", 1) for pair in line.group(1).split())


@pytest.mark.usefixtures("no_aws_configured")
def test_gateway_key_mode_runs_against_the_stand_in_after_init_secrets(tmp_path: Path) -> None:
    """The README's walkthrough: `AUTH_MODE=gateway_key make run`, then `init --secrets`."""
    log = tmp_path / "serve.log"
    env = {settings.ENV_AUTH_MODE: settings.AUTH_GATEWAY_KEY, "PYTHONPATH": str(ROOT)}
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    with gateway_process(env, stdout_path=log, serve_args=serve_args) as (url, _):
        started = log.read_text()
        # The first start says what to run, and logs no error about the secrets it lacks.
        assert "run `policy-gateway init --secrets`" in started
        assert '"level":"ERROR"' not in started, started
        with pytest.raises(anthropic.InternalServerError):  # no secret yet
            _ask(client(url, api_key="gk-anything"), "hello", streaming=False)
        operator = _operator_env(log.read_text())
        # A plain boto3 script in that shell finds its region (boto3 reads AWS_DEFAULT_REGION).
        script = (
            "import boto3; print(len(boto3.client('secretsmanager').list_secrets()['SecretList']))"
        )
        plain = subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, **operator},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (plain.returncode, plain.stdout.strip()) == (0, "0"), plain.stderr
        created = cli("init", "--secrets", env=operator)
        assert created.returncode == 0, created.stderr
        found = re.search(r"key 'local' = (\S+)", created.stdout)
        assert found is not None, created.stdout
        key = found.group(1)
        # Seen after the short back-off of a failed read, not a SECRETS_TTL_SECONDS.
        reply = eventually(lambda: _answer_or_none(client(url, api_key=key)), timeout=10)
        assert "hello" in _text(reply)
        with pytest.raises(anthropic.AuthenticationError):
            _ask(client(url, api_key="gk-wrong"), "hello", streaming=False)
        again = cli("init", "--secrets", env=operator)
        assert again.returncode == 0
        assert "created" not in again.stdout  # never overwritten
        assert key not in again.stdout


def _answer_or_none(sdk_client: anthropic.Anthropic) -> Any:
    try:
        return _ask(sdk_client, "hello", streaming=False)
    except anthropic.InternalServerError:
        return None


@pytest.mark.usefixtures("no_aws_configured")
def test_policy_set_against_the_stand_in_takes_effect_within_the_ttl(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    env = {settings.ENV_POLICY_CONFIG_TTL: "1", "PYTHONPATH": str(ROOT)}
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    with gateway_process(env, stdout_path=log, serve_args=serve_args) as (url, _):
        printed = log.read_text()
        assert (
            f"policy chain: SSM parameter {settings.DEFAULT_POLICY_CONFIG_PARAMETER} "
            "(the empty chain" in printed
        )
        assert _tool_calls(_ask(sdk(url), DANGEROUS, streaming=False)) == [
            ("bash", {"command": "rm -rf /"})
        ]
        chain = tmp_path / "chain.json"
        chain.write_text(BLOCK_RM)
        written = cli("policy", "set", str(chain), env=_operator_env(printed))
        assert written.returncode == 0, written.stderr
        eventually(
            lambda: _tool_calls(_ask(sdk(url), DANGEROUS, streaming=False)) == [], timeout=10
        )


def test_init_secrets_stores_anthropic_api_key_and_prints_the_gateway_key_once() -> None:
    created = cli("init", "--secrets", env={settings.ENV_ANTHROPIC_API_KEY: "sk-ant-mine"})
    assert created.returncode == 0, created.stderr
    secrets: Any = boto3.client("secretsmanager")
    stored = secrets.get_secret_value(SecretId=settings.DEFAULT_UPSTREAM_API_KEY_SECRET)
    assert stored["SecretString"] == "sk-ant-mine"
    assert "sk-ant-mine" not in created.stdout + created.stderr
    keys = json.loads(
        secrets.get_secret_value(SecretId=settings.DEFAULT_GATEWAY_KEYS_SECRET)["SecretString"]
    )
    assert [entry["name"] for entry in keys["keys"]] == ["local"]
    found = re.search(r"key 'local' = (\S+)", created.stdout)  # printed once, for the operator
    assert found is not None, created.stdout
    # The secret keeps its digest, never the key.
    assert keys["keys"][0]["sha256"] == key_digest(found.group(1)).hex()
    assert found.group(1) not in json.dumps(keys)


def test_the_stand_in_s_budget_table_outlasts_a_first_answer_slower_than_a_serving_read(
    aws_proxy: tuple[AWSProxy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto's first DynamoDB request imports its backend, seconds on a busy machine: the
    table is created once, not retried into "already exists" and a traceback."""
    proxy, url = aws_proxy
    monkeypatch.setenv(standins.ENV_DYNAMODB_ENDPOINT, url)
    monkeypatch.setenv(settings.ENV_FALLBACK_BUDGET_TABLE, "slow-first-answer")
    # The stand-in names its limits table after the budget's, in this process: gone after.
    monkeypatch.setenv(settings.ENV_LIMITS_TABLE, "slow-first-answer")
    failures: list[BaseException] = []

    def set_up() -> None:
        try:
            standins._serve_budget_table(url)
        except Exception as exc:  # lost with its thread otherwise: the test reports it
            failures.append(exc)

    proxy.hold()
    setting_up = threading.Thread(target=set_up, daemon=True)
    setting_up.start()
    # Held past the serving path's read timeout: a client with it gives up and retries.
    setting_up.join(READ_TIMEOUT_SECONDS + 1.0)
    proxy.release()
    setting_up.join(30)
    assert failures == []
    assert proxy.operations.count("DynamoDB_20120810.CreateTable") == 1
    tables = boto3.client("dynamodb").list_tables()["TableNames"]
    assert "slow-first-answer" in tables


@pytest.mark.usefixtures("no_aws_configured")
def test_stack_commands_against_the_stand_in_are_one_line_each(tmp_path: Path) -> None:
    """Our commands need only the banner's AWS_REGION (doctor once asked for a region while
    it was set; the banner exports AWS_DEFAULT_REGION too, for other AWS tools), and what
    needs a deployed stack says so in a line (it once said the stack was not found, to check
    --stack and --region)."""
    log = tmp_path / "serve.log"
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    with gateway_process({"PYTHONPATH": _this_tree()}, stdout_path=log, serve_args=serve_args):
        exported = _operator_env(log.read_text())
        assert exported["AWS_DEFAULT_REGION"] == exported["AWS_REGION"]
        operator = {k: v for k, v in exported.items() if k != "AWS_DEFAULT_REGION"}
        assert cli("flag", "status", env=operator, unset=("AWS_DEFAULT_REGION",)).returncode == 0
        for command in (
            ("doctor", "--stack", "policy-gateway"),
            ("flag", "status", "--stack", "policy-gateway"),
            ("keys", "list", "--stack", "policy-gateway"),
        ):
            result = cli(*command, env=operator, unset=("AWS_DEFAULT_REGION",))
            assert result.returncode == 1
            assert result.stdout == ""
            (line,) = result.stderr.splitlines()
            assert line.startswith(f"policy-gateway {command[0]}: stack policy-gateway ")
            assert "need a deployed stack" in line
            assert operator["AWS_ENDPOINT_URL"] in line
            assert "check --stack" not in line


@pytest.mark.usefixtures("no_aws_configured")
@pytest.mark.parametrize("stand_ins", [False, True], ids=["inline", "make-run"])
def test_serve_refuses_a_broken_inline_chain_in_one_line(stand_ins: bool) -> None:
    """An inline chain cannot change while the process lives: a broken one would make a
    "healthy" gateway whose every call is a 500. In Lambda this exit is an init failure."""
    ports = _stand_ins(free_port(), free_port()) if stand_ins else ["--port", str(free_port())]
    broken = '{"policies": [{"policy": "no_such_policy"}]}'
    result = _serve(*ports, env={settings.ENV_POLICY_CONFIG: broken})
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"policy-gateway serve: {settings.ENV_POLICY_CONFIG} is not valid: ")
    assert "no_such_policy" in line


@pytest.mark.usefixtures("no_aws_configured")
def test_the_banners_exports_carry_the_settings_the_commands_report(tmp_path: Path) -> None:
    """The README's walkthrough: `AUTH_MODE=gateway_key make run`, the banner's export line in
    another shell, then `keys add`. The commands report the running gateway's mode and TTLs,
    not this shell's defaults (they once said the keys go unchecked in passthrough mode)."""
    log = tmp_path / "serve.log"
    env = {
        "PYTHONPATH": _this_tree(),
        settings.ENV_AUTH_MODE: settings.AUTH_GATEWAY_KEY,
        settings.ENV_SECRETS_TTL: "5",
        settings.ENV_POLICY_CONFIG_TTL: "7",
    }
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    with gateway_process(env, stdout_path=log, serve_args=serve_args):
        operator = _operator_env(log.read_text())
        assert cli("init", "--secrets", env=operator).returncode == 0
        added = cli("keys", "add", "alice", env=operator)
        shown = cli("policy", "show", env=operator)
    assert added.returncode == 0, added.stderr
    assert "gateway_key mode" not in added.stderr
    assert f"within 5 s ({settings.ENV_SECRETS_TTL} in this shell" in added.stderr
    assert json.loads(shown.stdout)["gateway_ttl_seconds"] == 7.0


@pytest.mark.usefixtures("no_aws_configured")
def test_usage_in_another_shell_reads_the_limits_the_local_run_counted(tmp_path: Path) -> None:
    """`make run` counts limits in its stand-in's DynamoDB (the budget's table, as deployed),
    and the banner's export line names it: `policy-gateway usage` reads what it counted."""
    log = tmp_path / "serve.log"
    env = {
        "PYTHONPATH": str(ROOT),
        settings.ENV_POLICY_CONFIG: json.dumps(
            {"policies": [], "limits": {"requests_per_minute": 50}}
        ),
    }
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(free_port())]
    with gateway_process(env, stdout_path=log, serve_args=serve_args) as (url, _):
        sdk(url).messages.create(
            model="claude-sonnet-4-6", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
        operator = _operator_env(log.read_text())
        caller = key_caller(b"sk-ant-test-key")
        shown = cli("usage", "--caller", caller, env=operator)
    assert operator[settings.ENV_LIMITS_TABLE] == standins.LOCAL_FALLBACK_BUDGET_TABLE
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    assert answer["table"] == standins.LOCAL_FALLBACK_BUDGET_TABLE
    used = answer["limits"]["requests_per_minute"]
    assert (used["limit"], used["used"], used["remaining"]) == (50, 1, 49)
