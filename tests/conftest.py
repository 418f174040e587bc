"""Shared fixtures: moto for AWS, a fake upstream, and gateways on real ports.

Nothing here talks to real AWS or the real Anthropic API: every AWS client is
pointed at a local moto server and every gateway at the fake upstream.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import boto3
import httpx2
import pytest
from aws_lambda_powertools.metrics.provider.cloudwatch_emf import cloudwatch as emf_module
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer
from policy_gateway import settings
from policy_gateway.app import create_app
from policy_gateway.fallback.budget_table import create_table
from policy_gateway.observability import metrics
from policy_gateway.observability.logs import logger

from .support.aws import AWSProxy
from .support.clock import ManualClock
from .support.fake_bedrock import FakeBedrock
from .support.fake_upstream import FakeUpstream
from .support.gateway import GatewayFactory, GatewayStdout
from .support.servers import ThreadedServer, free_port, serving
from .support.traces import OTLPReceiver, XRayEndpoint

AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_MAX_ATTEMPTS": "1",
}


# Where AWS calls go when a test has not asked for moto: a port nothing listens
# on, so a stray call fails at once and can never reach real AWS.
NO_AWS = "http://127.0.0.1:9"
AWS_SERVICES = (
    "SSM",
    "SECRETS_MANAGER",
    "CLOUDWATCH",
    "CLOUDWATCH_LOGS",
    "CLOUDFORMATION",
    "LAMBDA",
    "DYNAMODB",
    "SNS",
    "SQS",
    "S3",
)
# The fixtures a unit test may not use: each starts a server, a process or moto.
SERVING_FIXTURES = frozenset(
    {
        "moto_endpoint",
        "aws_proxy",
        "ssm",
        "set_flag",
        "budget_table",
        "put_secret",
        "upstream",
        "upstream_url",
        "make_gateway",
        "keyed_gateway",
        "bedrock",
        "bedrock_env",
        "xray",
        "otlp",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers (docs/architecture.md: "Tests"): `unit` and `deploy` are marked by module; every
    other test is a gateway test, through real sockets, with moto behind it."""
    for item in items:
        if item.get_closest_marker("unit") is None:
            continue
        serving = SERVING_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if serving:
            raise pytest.UsageError(f"{item.nodeid} is a unit test but uses {sorted(serving)}")


@pytest.fixture(scope="session", autouse=True)
def _aws_sandbox() -> None:
    """Test credentials and a refusing endpoint for every AWS service: no test reaches AWS."""
    for key in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(key, None)
    os.environ.update(AWS_TEST_ENV)
    for service in AWS_SERVICES:
        os.environ[f"AWS_ENDPOINT_URL_{service}"] = NO_AWS


def _drop_emf(*_: object, **__: object) -> None:
    pass


@pytest.fixture(autouse=True)
def _metrics_per_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Powertools keeps its metric set in class-level state: each test starts and ends with
    it empty, so metrics an in-process gateway buffered never flush in a later test. EMF
    documents stay out of pytest's captured output (`gateway_stdout` collects them)."""
    metrics.discard()
    monkeypatch.setattr(emf_module, "print", _drop_emf, raising=False)
    yield
    metrics.discard()


@pytest.fixture(scope="session")
def _moto_server() -> Iterator[str]:
    """One moto server for the session, started by the first test that needs AWS."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def moto_endpoint(_moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every AWS SDK call of the test (and of the processes it starts) goes to moto, reset."""
    for service in AWS_SERVICES:
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", _moto_server)
    httpx2.post(f"{_moto_server}/moto-api/reset")
    return _moto_server


@pytest.fixture(autouse=True)
def _aws_for_gateway_tests(request: pytest.FixtureRequest) -> None:
    """Gateway tests get moto: a gateway reads SSM, Secrets Manager and DynamoDB as it
    serves. Unit and deploy tests ask for it by name when they need it."""
    if not any(request.node.get_closest_marker(tier) for tier in ("unit", "deploy")):
        request.getfixturevalue("moto_endpoint")


@pytest.fixture
def aws_proxy(moto_endpoint: str) -> Iterator[tuple[AWSProxy, str]]:
    """A recording, stallable AWS endpoint in front of moto, and its URL.

    Released at the end, so no held request outlives the test.
    """
    proxy = AWSProxy(moto_endpoint)
    with serving(proxy) as server:
        try:
            yield proxy, server.url
        finally:
            proxy.release()


@pytest.fixture
def ssm(moto_endpoint: str) -> Any:
    return boto3.client("ssm")


@pytest.fixture
def set_flag(ssm: Any) -> Callable[[str], None]:
    def put(value: str) -> None:
        ssm.put_parameter(
            Name=settings.DEFAULT_FLAG_PARAMETER, Value=value, Type="String", Overwrite=True
        )

    return put


BUDGET_TABLE = "test-fallback-budget"


@pytest.fixture
def budget_table(moto_endpoint: str) -> str:
    """The fallback budget's table in moto, created as template.yaml declares it."""
    create_table(boto3.client("dynamodb"), BUDGET_TABLE)
    return BUDGET_TABLE


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
def xray() -> Iterator[XRayEndpoint]:
    """A UDP socket in place of Lambda's X-Ray endpoint, decoding the spans sent to it."""
    endpoint = XRayEndpoint()
    yield endpoint
    endpoint.close()


@pytest.fixture
def otlp() -> Iterator[tuple[OTLPReceiver, str]]:
    """An OTLP/HTTP collector on loopback, and its URL (OTEL_EXPORTER_OTLP_ENDPOINT)."""
    receiver = OTLPReceiver()
    server = ThreadedServer(receiver).start()
    yield receiver, server.url
    server.stop()


@pytest.fixture
def clock() -> ManualClock:
    """Time for the TTL caches of a gateway started with `make_gateway(clock=clock)`."""
    return ManualClock()


BEDROCK_REGION = "us-west-2"


@pytest.fixture(scope="session")
def _bedrock_server() -> Iterator[tuple[FakeBedrock, ThreadedServer]]:
    credentials = Credentials(
        AWS_TEST_ENV["AWS_ACCESS_KEY_ID"],
        AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"],
        AWS_TEST_ENV["AWS_SESSION_TOKEN"],
    )
    fake = FakeBedrock(BEDROCK_REGION, credentials)
    server = ThreadedServer(fake).start()
    yield fake, server
    server.stop()


@pytest.fixture
def bedrock(_bedrock_server: tuple[FakeBedrock, ThreadedServer]) -> FakeBedrock:
    """The fake bedrock-runtime, emptied; its URL is `bedrock_env`'s endpoint."""
    fake, _ = _bedrock_server
    fake.reset()
    return fake


@pytest.fixture
def bedrock_env(
    _bedrock_server: tuple[FakeBedrock, ThreadedServer], bedrock: FakeBedrock
) -> dict[str, str]:
    """The environment of a gateway whose upstream is the fake Bedrock."""
    return {
        settings.ENV_UPSTREAM_PROVIDER: settings.PROVIDER_BEDROCK,
        settings.ENV_BEDROCK_REGION: BEDROCK_REGION,
        settings.ENV_BEDROCK_ENDPOINT_URL: _bedrock_server[1].url,
    }


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


KEYS_SECRET = "test/gateway-keys"
UPSTREAM_SECRET = "test/anthropic-key"
UPSTREAM_KEY = "sk-ant-upstream-held-by-the-gateway"
PutSecret = Callable[[str, str], None]


@pytest.fixture
def put_secret(moto_endpoint: str) -> PutSecret:
    client: Any = boto3.client("secretsmanager")

    def put(name: str, value: str) -> None:
        try:
            client.put_secret_value(SecretId=name, SecretString=value)
        except ClientError:
            client.create_secret(Name=name, SecretString=value)

    return put


@pytest.fixture
def keyed_gateway(
    make_gateway: GatewayFactory, put_secret: PutSecret, clock: ManualClock
) -> Callable[..., str]:
    """A gateway in gateway_key mode whose secrets hold `keys` and the upstream key."""

    def start(
        keys: object = ("gk-one-0123456789abcdef", "gk-two-0123456789abcdef"),
        upstream_secret: str | None = None,
    ) -> str:
        if keys is not None:
            put_secret(KEYS_SECRET, keys if isinstance(keys, str) else json.dumps(keys))
        put_secret(UPSTREAM_SECRET, upstream_secret or json.dumps({"api_key": UPSTREAM_KEY}))
        return make_gateway(
            auth_mode=settings.AUTH_GATEWAY_KEY,
            gateway_keys_secret=KEYS_SECRET,
            upstream_api_key_secret=UPSTREAM_SECRET,
            secrets_ttl=0.3,
            clock=clock,
        )

    return start
