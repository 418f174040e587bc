"""The bench's machinery: child processes, ports, and the environment each gateway gets.

Everything runs on loopback: the upstream stub (bench/upstream_stub.py) in its
own process, each gateway as a real `python -m policy_gateway serve` child, and
a moto server in this process for the fallback flag and the chain (SSM) and the
fallback budget's table (DynamoDB). A gateway's environment is spelled with the
names the gateway reads (policy_gateway.settings).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from policy_gateway import settings
from policy_gateway.observability import tracing_settings

from .workload import REPLACE_CHAIN

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
HOST = "127.0.0.1"
MESSAGES = "/v1/messages"

FLAG_ON = "/bench/fallback-on"
FLAG_OFF = "/bench/fallback-off"
BUDGET_TABLE = "bench-fallback-budget"
# Every benchmark fallback comes from one caller; the budget must not end them.
UNLIMITED_BUDGET = str(10**9)
# The built artifact reads its chain from SSM, as the template configures it.
CHAIN_PARAMETER = "/bench/policy-config"
# What the gateway reads: none of it may leak in from the shell that runs the bench.
GATEWAY_NAMES = frozenset(
    value
    for module in (settings, tracing_settings)
    for name, value in vars(module).items()
    if name.startswith("ENV_")
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


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


def budget_table_properties() -> dict[str, Any]:
    """The fallback budget table's properties, as template.yaml declares them for a stack."""
    from cfnlint.decode.cfn_yaml import load  # type: ignore[import-untyped]

    template = json.loads(json.dumps(load(str(ROOT / "template.yaml"))))
    properties: dict[str, Any] = template["Resources"]["FallbackBudgetTable"]["Properties"]
    return properties


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
            settings.ENV_AWS_REGION: "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_SSM": f"http://{HOST}:{moto_port}",
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://{HOST}:{moto_port}",
        }
        ssm = self.client("ssm")
        ssm.put_parameter(Name=FLAG_ON, Value="true", Type="String", Overwrite=True)
        ssm.put_parameter(Name=FLAG_OFF, Value="false", Type="String", Overwrite=True)
        ssm.put_parameter(Name=CHAIN_PARAMETER, Value=REPLACE_CHAIN, Type="String", Overwrite=True)
        self.create_budget_table()

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.aws["AWS_ENDPOINT_URL_SSM"],
            region_name=self.aws[settings.ENV_AWS_REGION],
            aws_access_key_id=self.aws["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.aws["AWS_SECRET_ACCESS_KEY"],
        )

    def create_budget_table(self) -> None:
        declared = budget_table_properties()
        dynamodb = self.client("dynamodb")
        dynamodb.create_table(
            TableName=BUDGET_TABLE,
            AttributeDefinitions=declared["AttributeDefinitions"],
            KeySchema=declared["KeySchema"],
            BillingMode=declared["BillingMode"],
        )
        dynamodb.update_time_to_live(
            TableName=BUDGET_TABLE, TimeToLiveSpecification=declared["TimeToLiveSpecification"]
        )

    def gateway_env(
        self,
        chain: str,
        flag: str = FLAG_OFF,
        budget_table: str | None = None,
        bedrock: bool = False,
        extra: dict[str, str] | None = None,
    ) -> dict[str, str]:
        inherited = {
            key: value
            for key, value in os.environ.items()
            if key not in GATEWAY_NAMES and not key.startswith("AWS_")
        }
        upstream = f"http://{HOST}:{self.upstream_port}"
        # The stub answers Bedrock's paths too; the gateway signs for it as for AWS.
        provider = (
            {
                settings.ENV_UPSTREAM_PROVIDER: settings.PROVIDER_BEDROCK,
                settings.ENV_BEDROCK_ENDPOINT_URL: upstream,
            }
            if bedrock
            else {}
        )
        return {
            **inherited,
            **self.aws,
            **provider,
            "PYTHONUNBUFFERED": "1",
            settings.ENV_UPSTREAM_BASE_URL: upstream,
            settings.ENV_POLICY_CONFIG: chain,
            settings.ENV_FLAG_PARAMETER: flag,
            settings.ENV_FALLBACK_BUDGET: UNLIMITED_BUDGET,
            **({settings.ENV_FALLBACK_BUDGET_TABLE: budget_table} if budget_table else {}),
            **(extra or {}),
        }

    @contextmanager
    def gateway(
        self,
        name: str,
        chain: str,
        flag: str = FLAG_OFF,
        budget_table: str | None = None,
        bedrock: bool = False,
        extra: dict[str, str] | None = None,
    ) -> Iterator[int]:
        """A gateway child process (`extra`: more of its environment); yields its port."""
        port = free_port()
        env = self.gateway_env(chain, flag, budget_table, bedrock, extra)
        with running(gateway_args(port), env, f"{name}.log", port):
            yield port
