"""Shared fixtures: moto for AWS, a fake upstream, and gateways on real ports.

Nothing here talks to real AWS or the real Anthropic API: every AWS client is
pointed at a local moto server and every gateway at the fake upstream.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import boto3
import httpx2
import pytest
from aws_lambda_powertools.metrics.provider.cloudwatch_emf import cloudwatch as emf_module
from moto.server import ThreadedMotoServer
from policy_gateway import settings
from policy_gateway.app import create_app
from policy_gateway.logs import logger

from .support.clock import ManualClock
from .support.fake_upstream import FakeUpstream
from .support.gateway import GatewayFactory, GatewayStdout
from .support.servers import ThreadedServer, free_port

AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_MAX_ATTEMPTS": "1",
}


@pytest.fixture(scope="session", autouse=True)
def moto_endpoint() -> Iterator[str]:
    """One moto server for the session; every AWS SDK call in the tests goes there."""
    for key in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(key, None)
    os.environ.update(AWS_TEST_ENV)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for service in ("SSM", "SECRETS_MANAGER", "CLOUDWATCH"):
        os.environ[f"AWS_ENDPOINT_URL_{service}"] = endpoint
    yield endpoint
    server.stop()


@pytest.fixture(autouse=True)
def _reset_moto(moto_endpoint: str) -> None:
    httpx2.post(f"{moto_endpoint}/moto-api/reset")


@pytest.fixture
def ssm() -> Any:
    return boto3.client("ssm")


@pytest.fixture
def set_flag(ssm: Any) -> Callable[[str], None]:
    def put(value: str) -> None:
        ssm.put_parameter(
            Name=settings.DEFAULT_FLAG_PARAMETER, Value=value, Type="String", Overwrite=True
        )

    return put


@pytest.fixture(scope="session")
def _upstream_server() -> Iterator[tuple[FakeUpstream, ThreadedServer]]:
    fake = FakeUpstream()
    server = ThreadedServer(fake).start()
    yield fake, server
    server.stop()


@pytest.fixture
def upstream(_upstream_server: tuple[FakeUpstream, ThreadedServer]) -> FakeUpstream:
    fake, _ = _upstream_server
    fake.reset()
    return fake


@pytest.fixture
def upstream_url(
    _upstream_server: tuple[FakeUpstream, ThreadedServer], upstream: FakeUpstream
) -> str:
    return _upstream_server[1].url


@pytest.fixture
def clock() -> ManualClock:
    """Time for the TTL caches of a gateway started with `make_gateway(clock=clock)`."""
    return ManualClock()


@pytest.fixture
def make_gateway(upstream_url: str) -> Iterator[GatewayFactory]:
    """Start the real gateway app under uvicorn; keyword arguments override Settings."""
    servers: list[ThreadedServer] = []

    def start(**overrides: Any) -> str:
        base = settings.Settings(
            upstream_base_url=upstream_url, upstream_max_retries=0, flag_ttl=0.2
        )
        server = ThreadedServer(create_app(replace(base, **overrides))).start()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def gateway_stdout(monkeypatch: pytest.MonkeyPatch) -> GatewayStdout:
    sink = GatewayStdout()
    monkeypatch.setattr(logger.registered_handler, "stream", sink)
    # Powertools Metrics emits EMF with a bare print(); shadow it in that module.
    monkeypatch.setattr(emf_module, "print", sink.print, raising=False)
    return sink
