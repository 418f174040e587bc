"""The operator's commands: steer a deployed gateway through SSM, create what a new stack
needs, check a stack, read a caller's fallback budget (`policy-gateway --help`).

They honour the standard AWS SDK environment (region, profile,
AWS_ENDPOINT_URL_SSM, AWS_ENDPOINT_URL_DYNAMODB) and never run inside the gateway.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

from .. import settings

FLAG_VALUES = {"on": "true", "off": "false"}
# What `policy-gateway init` writes: the fallback off, no policies. The flag
# parameter is created with this pattern, so SSM refuses any other value.
FLAG_ALLOWED_PATTERN = "^(true|false)$"
EMPTY_POLICY_CHAIN = '{"policies": []}'


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ssm_client(region: str | None = None) -> Any:
    import boto3

    return boto3.client("ssm", region_name=region or settings.aws_region())


def flag_parameter(name: str, value: str) -> dict[str, str]:
    # The pattern makes SSM itself refuse a typo ("ture", "on") from any writer
    # (console, aws cli) instead of the gateway reading it as off.
    return {
        "Name": name,
        "Value": value,
        "Type": "String",
        "AllowedPattern": FLAG_ALLOWED_PATTERN,
        "Description": "Policy Gateway passthrough fallback: true or false",
    }


def _parameter_status(name: str, ttl: float) -> dict[str, Any]:
    parameter = ssm_client().get_parameter(Name=name)["Parameter"]
    modified: datetime = parameter["LastModifiedDate"]
    age = (datetime.now(UTC) - modified).total_seconds()
    return {
        "parameter": name,
        "value": parameter["Value"],
        "version": parameter["Version"],
        "last_modified": modified.isoformat(),
        "seen_by_running_gateways_within_seconds": round(max(0.0, ttl - age), 1),
    }


def flag(args: argparse.Namespace) -> int:
    config = settings.Settings.from_env()
    if args.action in ("on", "off"):
        ssm_client().put_parameter(
            **flag_parameter(config.flag_parameter, FLAG_VALUES[args.action]), Overwrite=True
        )
    status = _parameter_status(config.flag_parameter, config.flag_ttl)
    from ..fallback.flag import parse_flag

    status["fallback_enabled"] = parse_flag(status["value"]) is True
    print(json.dumps(status, indent=2))
    return 0


def policy(args: argparse.Namespace) -> int:
    from gateway_policies import PolicyConfigError, load_chain

    from . import resolution

    if args.action == "validate":
        return resolution.validate(args, say)
    config = settings.Settings.from_env()
    name = config.policy_config_parameter or settings.DEFAULT_POLICY_CONFIG_PARAMETER
    if args.action == "set":
        if not args.file:
            raise SystemExit("policy set needs a FILE")
        with open(args.file, encoding="utf-8") as handle:
            text = handle.read()
        try:
            chain = load_chain(text)
        except PolicyConfigError as exc:
            say(f"refusing to write an invalid policy chain: {exc}")
            return 2
        ssm_client().put_parameter(Name=name, Value=text, Type="String", Overwrite=True)
        say(f"wrote {len(chain.policies)} policies to {name}: {', '.join(chain.names) or '-'}")
    status = _parameter_status(name, config.policy_config_ttl)
    if args.caller:
        status.update(resolution.shown(status["value"], args))
    print(json.dumps(status, indent=2))
    return 0


def init(args: argparse.Namespace) -> int:
    """Create the flag and the policy chain where they do not exist; never overwrite.

    The stack does not own these values (a stack update would write its own
    values back), so this is how a new stack gets them: the fallback off and
    an empty chain, which the operator then changes with `flag` and `policy`.
    """
    if args.stack:
        from .deployment import Deployment

        deployment = Deployment(args.stack, args.region)
        flag_name, chain_name = deployment.flag_parameter, deployment.policy_config_parameter
    else:
        config = settings.Settings.from_env()
        flag_name = config.flag_parameter
        chain_name = config.policy_config_parameter or settings.DEFAULT_POLICY_CONFIG_PARAMETER
    ssm = ssm_client(args.region)
    initial = [
        flag_parameter(flag_name, FLAG_VALUES["off"]),
        {
            "Name": chain_name,
            "Value": EMPTY_POLICY_CHAIN,
            "Type": "String",
            "Description": "Policy Gateway policy chain (JSON)",
        },
    ]
    for parameter in initial:
        # Overwrite=False makes SSM itself refuse to replace a value, so two
        # operators running init at once cannot clobber a live one either.
        try:
            ssm.put_parameter(**parameter, Overwrite=False)
        except ssm.exceptions.ParameterAlreadyExists:
            version = ssm.get_parameter(Name=parameter["Name"])["Parameter"]["Version"]
            print(f"kept     {parameter['Name']} (exists, version {version}; never overwritten)")
        else:
            print(f"created  {parameter['Name']} = {parameter['Value']}")
    return 0


def doctor(args: argparse.Namespace) -> int:
    from .doctor.main import main as run_doctor

    return run_doctor(args.stack, args.region, args.url)


def budget(args: argparse.Namespace) -> int:
    config = settings.Settings.from_env()
    if not config.fallback_budget_table:
        say(
            f"{settings.ENV_FALLBACK_BUDGET_TABLE} is not set: each gateway process keeps its own "
            "fallback budget, which only it can read"
        )
        return 2
    from ..fallback.budget_table import dynamodb_client, read_usage

    usage = read_usage(
        dynamodb_client(),
        config.fallback_budget_table,
        args.caller,
        config.fallback_budget,
        config.fallback_budget_window,
        time.time(),
    )
    print(json.dumps({**usage.as_dict(), "table": config.fallback_budget_table}, indent=2))
    return 0
