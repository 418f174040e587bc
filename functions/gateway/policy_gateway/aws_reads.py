"""SSM Parameter Store and Secrets Manager: the clients, and the reads parameters.py caches.

Reads go through Powertools Parameters, whose calls are blocking boto3: the
cache runs them in a worker thread, never on the event loop. boto3 itself is
imported only on the first read, keeping it off the cold path. Every client
is bounded (timeouts and attempts below) and rebuilt after a SnapStart restore
(`drop_clients`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import settings

# One AWS read: two attempts in all (botocore's `total_max_attempts`; the
# `max_attempts` key would count retries only, three attempts in all), each
# given 1 s to connect and 2 s to read. Against an endpoint that accepts and
# never answers that is 2 s + a back-off of at most 1 s + 2 s.
CONNECT_TIMEOUT_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 2.0
TOTAL_ATTEMPTS = 2

# The staging label of a secret's version in force.
SECRET_CURRENT_STAGE = "AWSCURRENT"


def aws_config() -> Any:
    from botocore.config import Config

    # boto's defaults (60 s reads, three attempts) would let an AWS endpoint that
    # stalls, rather than refuses, hold a read for minutes.
    return Config(
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        retries={"total_max_attempts": TOTAL_ATTEMPTS, "mode": "standard"},
    )


@cache
def _service_models() -> Any:
    """botocore's loader of service models and endpoints: static data, parsed once per process."""
    from botocore.session import get_session

    return get_session().get_component("data_loader")


def aws_client(service: str) -> Any:
    """A new client in a new botocore session, so it resolves its credentials anew.

    Only the parsed service models are shared (50-100 ms to parse again, which
    a SnapStart restore would otherwise pay for each client).
    """
    from botocore.session import Session

    session = Session()
    session.register_component("data_loader", _service_models())
    return session.create_client(service, region_name=settings.aws_region(), config=aws_config())


@cache
def _ssm() -> Any:
    from aws_lambda_powertools.utilities.parameters import SSMProvider

    return SSMProvider(boto3_client=aws_client("ssm"))


@cache
def _secrets() -> Any:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto3_client=aws_client("secretsmanager"))


def drop_clients() -> None:
    """Close the SSM and Secrets Manager clients' connections and forget the clients.

    The next read builds new ones, each in a new boto3 session that resolves
    its credentials anew from the runtime's provider.
    """
    for provider in (_ssm, _secrets):
        if provider.cache_info().currsize:
            provider().client.close()
        provider.cache_clear()


@dataclass(frozen=True)
class VersionedParameter:
    value: str
    version: int
    modified: float
    """When this version was written (epoch seconds): how old the value in force is."""


def read_ssm_parameters(names: Sequence[str]) -> dict[str, VersionedParameter]:
    """The named parameters SSM has, in one GetParameters call; a name it lacks is absent.

    Through the Powertools provider's client: its `get_parameters_by_name` would
    drop the versions, which name the chain in force.
    """
    found = _ssm().client.get_parameters(Names=list(names), WithDecryption=True)
    return {
        str(parameter["Name"]): VersionedParameter(
            str(parameter["Value"]),
            int(parameter["Version"]),
            parameter["LastModifiedDate"].timestamp(),
        )
        for parameter in found["Parameters"]
    }


def read_secret(name: str) -> str:
    # The stage AWS reads by default, named: `policy-gateway keys` moves it to each
    # new version with UpdateSecretVersionStage, which moto's default read ignores.
    return str(_secrets().get(name, force_fetch=True, VersionStage=SECRET_CURRENT_STAGE))
