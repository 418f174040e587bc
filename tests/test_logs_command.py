"""`policy-gateway logs`: one readable line per call, from the lines a real gateway emits
(`make run`'s output, on standard input or from a file) or from a stack's log group in
CloudWatch Logs (moto's), `--since` and `--follow` included."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import boto3
import pytest
from policy_gateway import settings
from policy_gateway.cli import logs
from policy_gateway.cli.main import build_parser
from policy_gateway.local.simulated_reply import TOOL_TRIGGER

from .support.cli import cli
from .support.sdk import sdk
from .support.servers import gateway_process
from .support.stack import create_gateway_stack, gateway_environment

MODEL = "claude-sonnet-4-6"
# A model the simulator serves, which the chain rewrites to one it does not (a 404).
RETIRING = "claude-haiku-4-5"
SECRET = "AKIAIOSFODNN7EXAMPLE"
CHAIN = json.dumps(
    {
        "policies": [
            {"policy": "redact_secrets", "options": {}},
            {"policy": "rewrite_model", "options": {"map": {RETIRING: "claude-instant-1.2"}}},
            {"policy": "block_tool_calls", "options": {"rules": [{"tool": "^bash$"}]}},
        ]
    }
)
STACK = "gw-logs"


def _ask(client: anthropic.Anthropic, text: str, model: str = MODEL) -> None:
    client.messages.create(
        model=model,
        max_tokens=32,
        messages=[{"role": "user", "content": text}],
        tools=[{"name": "bash", "input_schema": {"type": "object"}}],
    )


@pytest.fixture
def run_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, set_flag: Callable[[str], None]
) -> Path:
    """What `serve --simulate-upstream` printed (stdout and stderr) for three calls: a
    redaction, a blocked tool call, a fallback; with its banner, EMF documents and warnings."""
    monkeypatch.delenv(settings.ENV_UPSTREAM_BASE_URL, raising=False)
    set_flag("true")
    log = tmp_path / "run.log"
    env = {settings.ENV_POLICY_CONFIG: CHAIN, "PYTHONUNBUFFERED": "1"}
    with gateway_process(env, stdout_path=log, serve_args=["--simulate-upstream"]) as (url, _):
        client = sdk(url)
        _ask(client, f"my key is {SECRET}")
        _ask(client, f'{TOOL_TRIGGER} bash {{"command": "ls"}}')
        _ask(client, "hello", model=RETIRING)
        deadline = time.monotonic() + 10
        while log.read_text().count('"call finished"') < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    return log


def _logs(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policy_gateway", "logs", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=False,
    )


def test_a_redaction_a_block_and_a_fallback_are_one_readable_line_each(run_log: Path) -> None:
    printed = run_log.read_text()
    assert '"_aws"' in printed  # EMF documents are among what it reads
    piped = _logs(stdin=printed)
    assert piped.returncode == 0, piped.stderr
    shown = piped.stdout.splitlines()
    lines = [line for line in shown if " upstream received " not in line]
    assert len(lines) == 3, lines
    redaction, block, fallback = lines
    # And what the simulator received, one line per request it answered (not the fallback's
    # first attempt, which it refused): the key as the chain left it.
    received = [line for line in shown if " upstream received " in line]
    assert len(received) == 3, received
    assert 'user: "my key is [REDACTED:aws_access_key_id]"' in received[0]
    assert received[0].endswith("| redacted: aws_access_key_id=1")
    for line in lines:
        assert " 200 messages " in line
        assert "caller=key:" in line
        assert "chain=default@inline:" in line
        assert not line.startswith("{")
    assert "redact_secrets redact where=request kind=aws_access_key_id count=1" in redaction
    assert SECRET not in piped.stdout
    assert f"model={MODEL}" in redaction
    assert "fallback=none" in redaction
    assert "block_tool_calls block" in block
    assert "tool=bash" in block
    assert "fallback=succeeded" in fallback
    assert "rewrite_model rewrite" in fallback
    assert f"model={RETIRING}" in fallback
    # The same from a file; --all adds every other line as it is.
    assert _logs("--file", str(run_log)).stdout == piped.stdout
    everything = _logs("--all", stdin=printed).stdout.splitlines()
    assert len(everything) > 3
    assert any('"_aws"' in line for line in everything)


def _call_line(caller: str) -> str:
    return json.dumps(
        {
            "level": "INFO",
            "message": "call finished",
            "status": 200,
            "endpoint": "messages",
            "caller": caller,
            "chain": "default",
            "chain_version": "v2:0badc0de",
            "fallback": "none",
            "policy_actions": [],
        }
    )


@pytest.fixture
def log_group() -> Any:
    """A stack in moto whose function's log group exists; (client, group name)."""
    function = create_gateway_stack(STACK, gateway_environment(STACK))
    group = f"/aws/lambda/{function}"
    client = boto3.client("logs")
    client.create_log_group(logGroupName=group)
    client.create_log_stream(logGroupName=group, logStreamName="one")
    return client, group


def _put(client: Any, group: str, messages: list[str], ago_seconds: float = 0) -> None:
    if not messages:
        return
    at = int((time.time() - ago_seconds) * 1000)
    client.put_log_events(
        logGroupName=group,
        logStreamName="one",
        logEvents=[
            {"timestamp": at + index, "message": text} for index, text in enumerate(messages)
        ],
    )


def test_stack_reads_the_function_s_log_group_since_a_duration(log_group: Any) -> None:
    client, group = log_group
    _put(client, group, [_call_line("old-caller")], ago_seconds=1800)
    emf = json.dumps({"_aws": {"CloudWatchMetrics": []}, "Requests": 1})
    _put(client, group, ["START RequestId: 1 Version: 3", emf, _call_line("new-caller")])
    recent = cli("logs", "--stack", STACK, "--region", "us-east-1")
    assert recent.returncode == 0, recent.stderr
    (line,) = recent.stdout.splitlines()
    assert "caller=new-caller chain=default@v2:0badc0de" in line
    # The event's time stands in for a line without a timestamp.
    assert line.startswith(time.strftime("%Y-", time.gmtime()))
    hour = cli("logs", "--stack", STACK, "--since", "1h").stdout
    assert ["old-caller" in text for text in hour.splitlines()] == [True, False]


def test_follow_prints_each_new_call_once_as_it_arrives(log_group: Any) -> None:
    client, group = log_group
    _put(client, group, [_call_line("first")])
    arriving = iter([[_call_line("second")], [], [_call_line("third")]])
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        _put(client, group, next(arriving))

    out = io.StringIO()
    args = build_parser().parse_args(["logs", "--stack", STACK, "--follow"])
    assert logs.run(args, out=out, sleep=sleep, polls=4) == 0
    callers = [line.split("caller=")[1].split()[0] for line in out.getvalue().splitlines()]
    assert callers == ["first", "second", "third"]
    assert slept == [logs.POLL_SECONDS] * 3


def test_follow_without_a_stack_is_refused_in_one_line() -> None:
    refused = cli("logs", "--follow")
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0
    assert "--stack" in refused.stderr


def test_a_reader_that_leaves_early_ends_the_command_quietly_with_success(
    tmp_path: Path,
) -> None:
    """`policy-gateway logs ... | head -1`, as Unix filters end: no BrokenPipeError, exit 0."""
    calls = tmp_path / "calls.log"
    # Far more than a pipe's buffer (64 KiB), so the writer meets the closed pipe.
    calls.write_text("\n".join(_call_line(f"caller-{n}") for n in range(5000)) + "\n")
    command = f"{sys.executable} -m policy_gateway logs --file {calls} 2>&1 | head -1"
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=False,
    )
    assert piped.returncode == 0, piped.stdout
    (line,) = piped.stdout.splitlines()
    assert "caller=caller-0 " in line
