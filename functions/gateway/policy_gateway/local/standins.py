"""The first-run stand-ins `serve` starts when asked: an upstream simulator and an embedded AWS.

- `--simulate-upstream`: the Messages API simulator (simulator.py), or with
  UPSTREAM_PROVIDER=bedrock the Bedrock one (bedrock_simulator.py), in this
  process on a free loopback port; UPSTREAM_BASE_URL (or, for Bedrock,
  AWS_ENDPOINT_URL_BEDROCK_RUNTIME) points the gateway at it.
- `--embedded-ssm`: a moto server on one port serving SSM (the flag and the
  policy chain, read as a deployed gateway reads them), Secrets Manager (the
  `gateway_key` mode's two secrets, which `policy-gateway init --secrets`
  creates) and DynamoDB (the fallback budget's table), to the AWS SDKs only:
  no web page can read or change it (aws_standin.py).

Neither ever replaces an endpoint that is configured. Every port is tried
before anything starts or is announced (listen.py). What they start or leave
alone is announced through the `say` of the command that started them.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import settings
from ..fallback.flag import FLAG_VALUES, flag_parameter
from ..policy_source import EMPTY_POLICY_CHAIN
from .listen import LOOPBACK, claim

# A line for the operator, on the starting command's standard error.
Say = Callable[[str], None]

LOCAL_REGION = "us-east-1"
# Any value will do: moto and the Bedrock simulator check no secret key, and a
# request signed with these can reach nothing but a local stand-in.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
ENV_SSM_ENDPOINT = "AWS_ENDPOINT_URL_SSM"
ENV_SECRETS_ENDPOINT = "AWS_ENDPOINT_URL_SECRETS_MANAGER"
ENV_DYNAMODB_ENDPOINT = "AWS_ENDPOINT_URL_DYNAMODB"
# The table the embedded DynamoDB serves the fallback budget from.
LOCAL_FALLBACK_BUDGET_TABLE = "policy-gateway-fallback-budget"
STARTED_WITHIN_SECONDS = 10.0


def _local_aws_identity() -> None:
    for name, value in LOCAL_CREDENTIALS.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_REGION", LOCAL_REGION)
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])


def _standin_client(service: str) -> Any:
    """A client of the embedded AWS, which `start_embedded_aws` names in the environment.

    botocore's own timeouts (60 s reads): the stand-in answers in this process, and a
    first request can wait on moto importing the service's backend."""
    import boto3

    return boto3.client(service, region_name=settings.aws_region())  # type: ignore[call-overload]


def _serve_in_thread(app: Any, name: str) -> str:
    import uvicorn

    listener = claim(name, LOOPBACK, 0, "a free port is picked")
    port = int(listener.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, daemon=True, name=name
    )
    thread.start()
    deadline = time.monotonic() + STARTED_WITHIN_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise SystemExit(f"policy-gateway serve: the {name} did not start")
        time.sleep(0.02)
    return f"http://{LOOPBACK}:{port}"


def serve_simulator(wrap: Callable[[Any], Any] | None = None) -> str:
    """A Messages API simulator (judge calls included) on a free loopback port: its URL.
    `wrap` puts an ASGI app around it (the bench records what the judge was asked)."""
    from .simulator import create_simulator

    app = create_simulator()
    return _serve_in_thread(app if wrap is None else wrap(app), "upstream simulator")


def start_simulated_upstream(config: settings.Settings, say: Say) -> str | None:
    """The simulator's URL, now serving; None when an upstream endpoint is configured."""
    if config.bedrock:
        if os.environ.get(settings.ENV_BEDROCK_ENDPOINT_URL):
            say(f"{settings.ENV_BEDROCK_ENDPOINT_URL} is set; not starting the Bedrock simulator")
            return None
        from .bedrock_simulator import create_bedrock_simulator

        _local_aws_identity()
        url = _serve_in_thread(create_bedrock_simulator(), "Bedrock simulator")
        os.environ[settings.ENV_BEDROCK_ENDPOINT_URL] = url
        say(f"Bedrock simulator: {url}")
        return url
    if os.environ.get(settings.ENV_UPSTREAM_BASE_URL):
        say(f"{settings.ENV_UPSTREAM_BASE_URL} is set; not starting the upstream simulator")
        return None
    url = serve_simulator()
    os.environ[settings.ENV_UPSTREAM_BASE_URL] = url
    say(f"upstream simulator: {url}")
    return url


def upstream_banner(config: settings.Settings, simulated: str | None) -> str:
    """Where the gateway's calls really go, as the start-up banner names it."""
    if config.bedrock:
        where = f"Amazon Bedrock ({config.bedrock_region or 'the AWS configuration region'})"
        endpoint = config.bedrock_endpoint_url
    else:
        where, endpoint = "the Anthropic API", config.upstream_base_url
    if simulated is not None:
        return f"{where}, simulated at {simulated} (nothing leaves this machine)"
    return f"{where} at {endpoint}" if endpoint else where


def start_embedded_aws(port: int, say: Say) -> str | None:
    """The stand-in's URL, now serving SSM, Secrets Manager and DynamoDB; None if SSM is set."""
    if os.environ.get(ENV_SSM_ENDPOINT):
        say(f"{ENV_SSM_ENDPOINT} is set; not starting the embedded SSM")
        return None
    from .aws_standin import serve

    serve(port)
    endpoint = f"http://{LOOPBACK}:{port}"
    _local_aws_identity()
    os.environ[ENV_SSM_ENDPOINT] = endpoint
    say(f"embedded SSM: {endpoint}")
    if not os.environ.get(ENV_SECRETS_ENDPOINT):
        os.environ[ENV_SECRETS_ENDPOINT] = endpoint
        say(f"embedded Secrets Manager: {endpoint}")
    if not os.environ.get(ENV_DYNAMODB_ENDPOINT):
        _serve_budget_table(endpoint)
        say(f"embedded DynamoDB: {endpoint}")
    _seed_parameters(say)
    return endpoint


def _serve_budget_table(endpoint: str) -> None:
    """Keep the fallback budget and the per-caller limits in the stand-in's DynamoDB, in one
    table as a deployed stack does, so `policy-gateway budget` and `usage` read them."""
    from ..fallback.budget_table import create_table

    os.environ[ENV_DYNAMODB_ENDPOINT] = endpoint
    table = os.environ.setdefault(settings.ENV_FALLBACK_BUDGET_TABLE, LOCAL_FALLBACK_BUDGET_TABLE)
    os.environ.setdefault(settings.ENV_LIMITS_TABLE, table)
    # A stand-in client, not the serving path's 2 s reads: moto's first DynamoDB
    # request imports its backend, seconds on a busy machine, and a timed-out
    # CreateTable retried finds the table it made ("already exists").
    create_table(_standin_client("dynamodb"), table)


def _seed_parameters(say: Say) -> None:
    """The flag off, and the chain where a deployed gateway reads it: in its SSM parameter.

    The chain is seeded from POLICY_CONFIG (or is the empty chain), so
    `policy-gateway policy set` changes it within the TTL, as it would deployed.
    """
    os.environ.setdefault(
        settings.ENV_POLICY_CONFIG_PARAMETER, settings.DEFAULT_POLICY_CONFIG_PARAMETER
    )
    config = settings.Settings.from_env()
    ssm = _standin_client("ssm")
    ssm.put_parameter(**flag_parameter(config.flag_parameter, FLAG_VALUES["off"]), Overwrite=True)
    assert config.policy_config_parameter is not None
    ssm.put_parameter(
        Name=config.policy_config_parameter,
        Value=config.policy_config or EMPTY_POLICY_CHAIN,
        Type="String",
        Overwrite=True,
    )
    seeded = f"from {settings.ENV_POLICY_CONFIG}" if config.policy_config else "the empty chain"
    say(
        f"policy chain: SSM parameter {config.policy_config_parameter} ({seeded}; re-read every "
        f"{config.policy_config_ttl:g} s, change it with `policy-gateway policy set FILE`)"
    )


# The gateway's settings the operator commands read (names, TTLs, the auth mode): set for
# this gateway, another shell's commands must report and act on its values, not defaults.
OPERATOR_SETTINGS = (
    settings.ENV_FALLBACK_BUDGET_TABLE,
    settings.ENV_LIMITS_TABLE,
    settings.ENV_AUTH_MODE,
    settings.ENV_FLAG_PARAMETER,
    settings.ENV_FLAG_TTL,
    settings.ENV_POLICY_CONFIG_PARAMETER,
    settings.ENV_POLICY_CONFIG_TTL,
    settings.ENV_GATEWAY_KEYS_SECRET,
    settings.ENV_UPSTREAM_API_KEY_SECRET,
    settings.ENV_SECRETS_TTL,
    settings.ENV_FALLBACK_BUDGET,
    settings.ENV_FALLBACK_BUDGET_WINDOW,
)


def operator_env(endpoint: str) -> str:
    """What another shell exports so `policy-gateway flag|policy|init|budget|keys` reach the
    stand-in and report this gateway's settings."""
    region = os.environ.get("AWS_REGION", LOCAL_REGION)
    # AWS_DEFAULT_REGION too: the AWS CLI and every boto3 release read it, not all AWS_REGION.
    values = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        **LOCAL_CREDENTIALS,
    }
    for name in OPERATOR_SETTINGS:
        value = os.environ.get(name)
        if value:
            values[name] = value
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in values.items())
