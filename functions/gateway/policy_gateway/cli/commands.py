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

# `budget top` lists the callers with the most fallbacks instead of reading one.
TOP = "top"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _parameter_status(parameter: dict[str, Any], ttl: float) -> dict[str, Any]:
    modified: datetime = parameter["LastModifiedDate"]
    age = (datetime.now(UTC) - modified).total_seconds()
    return {
        "parameter": parameter["Name"],
        "value": parameter["Value"],
        "version": parameter["Version"],
        "last_modified": modified.isoformat(),
        "seen_by_running_gateways_within_seconds": round(max(0.0, ttl - age), 1),
    }


def flag(args: argparse.Namespace) -> int:
    from ..fallback.flag import FLAG_VALUES, flag_parameter, parse_flag
    from .operator_targets import resolve

    targets = resolve(args.stack, args.region)
    ssm = targets.client("ssm")
    name = targets.config.flag_parameter
    parameter = targets.existing_parameter(name, "the fallback flag")
    if args.action in ("on", "off"):
        ssm.put_parameter(**flag_parameter(name, FLAG_VALUES[args.action]), Overwrite=True)
        parameter = targets.existing_parameter(name, "the fallback flag")
    status = _parameter_status(parameter, targets.config.flag_ttl)
    status["fallback_enabled"] = parse_flag(status["value"]) is True
    status["gateway_ttl_seconds"] = targets.config.flag_ttl
    status["gateway_ttl_from"] = targets.setting_source(settings.ENV_FLAG_TTL)
    print(json.dumps(status, indent=2))
    return 0


def policy(args: argparse.Namespace) -> int:
    from . import resolution
    from .operator_targets import resolve
    from .policy_file import chain_diff, read_chain_file

    if args.action != "show" and not args.file:
        raise SystemExit(f"policy {args.action} needs a FILE")
    if args.action == "validate":
        checked = read_chain_file(args.file)
        print(f"{args.file}: {checked.summary}")
        if args.caller:
            print(resolution.line(checked.document, args))
        return 0
    proposed = read_chain_file(args.file) if args.file else None
    targets = resolve(args.stack, args.region)
    ssm = targets.client("ssm")
    name = targets.policy_config_parameter
    live = targets.existing_parameter(name, "the policy chain")
    if args.action == "diff" and proposed:
        label = f"{name} (version {live['Version']})"
        lines = chain_diff(live["Value"], label, proposed)
        print("\n".join(lines) if lines else f"no change: {proposed.path} matches {label}")
        if args.caller:
            print(f"with {proposed.path}, {resolution.line(proposed.document, args)}")
        return 0
    if args.action == "set" and proposed:
        ssm.put_parameter(Name=name, Value=proposed.text, Type="String", Overwrite=True)
        live = targets.existing_parameter(name, "the policy chain")
        say(f"wrote {name} version {live['Version']}: {proposed.summary}")
    status = _parameter_status(live, targets.config.policy_config_ttl)
    # The document itself, not its JSON text escaped into a string; a value that is
    # not JSON (the gateway refuses it) is shown as it is stored.
    try:
        status["document"] = json.loads(status.pop("value"))
    except ValueError:
        status["value"] = live["Value"]
    status["gateway_ttl_seconds"] = targets.config.policy_config_ttl
    status["gateway_ttl_from"] = targets.setting_source(settings.ENV_POLICY_CONFIG_TTL)
    if args.caller:
        status.update(resolution.shown(live["Value"], args))
    if args.action == "show" and targets.stack:
        status.update(_gateways_loaded(targets.stack, targets.region, live))
    print(json.dumps(status, indent=2))
    return 0


def _gateways_loaded(stack: str, region: str | None, live: dict[str, Any]) -> dict[str, Any]:
    """Which version the stack's gateways last loaded, from their `policy chain loaded` lines:
    a version they rejected is live in SSM, not in them."""
    from .chain_lines import gateways_report
    from .logs import log_group

    group, logs = log_group(stack, region)
    return gateways_report(logs, group, live, time.time())


def init(args: argparse.Namespace) -> int:
    """Create the flag and the policy chain where they do not exist; never overwrite.

    The stack does not own these values (a stack update would write its own
    values back), so this is how a new stack gets them: the fallback off and
    an empty chain, which the operator then changes with `flag` and `policy`.
    """
    from ..fallback.flag import FLAG_VALUES, flag_parameter
    from ..policy_source import EMPTY_POLICY_CHAIN
    from .operator_errors import OperatorError
    from .operator_targets import resolve

    if args.secrets and args.stack:
        # Refused before anything is created: a stack's secrets are its own.
        raise OperatorError(
            "--secrets is for a run without a stack: a stack creates its own secrets; "
            "nothing created",
            "fill them as its outputs GatewayKeysSecretArn and UpstreamApiKeySecretArn say",
            exit_code=2,
        )
    targets = resolve(args.stack, args.region)
    unknown = targets.unknown_names()
    if unknown and not args.custom_names:
        name = unknown[0]
        close = targets.nearest(name)
        raise OperatorError(
            f"{targets.parameters[name]}={name} is neither a default name nor a stack's; "
            "nothing created",
            f"did you mean {close}?" if close else "pass --custom-names to create it",
            exit_code=2,
        )
    flag_name, chain_name = targets.config.flag_parameter, targets.policy_config_parameter
    ssm = targets.client("ssm")
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
    if args.secrets:
        from .local_secrets import create_local_secrets

        return create_local_secrets(args)
    return 0


def doctor(args: argparse.Namespace) -> int:
    from .deployment import region
    from .doctor.main import main as run_doctor

    return run_doctor(args.stack, region(args.region), args.url)


def budget(args: argparse.Namespace) -> int:
    from ..fallback.budget_table import read_usage, top_callers
    from .operator_errors import OperatorError
    from .operator_targets import resolve

    targets = resolve(args.stack, args.region)
    config = targets.config
    if not config.fallback_budget_table:
        say(
            f"{settings.ENV_FALLBACK_BUDGET_TABLE} is not set in {targets.source}: each gateway "
            "process keeps its own fallback budget, which only it can read"
        )
        return 2
    dynamodb = targets.client("dynamodb")
    table = config.fallback_budget_table
    try:
        if args.caller == TOP:
            usages = top_callers(
                dynamodb,
                table,
                config.fallback_budget,
                config.fallback_budget_window,
                time.time(),
                args.limit,
            )
            answer: dict[str, Any] = {
                "table": table,
                "callers": [usage.as_dict() for usage in usages],
            }
        else:
            usage = read_usage(
                dynamodb,
                table,
                args.caller,
                config.fallback_budget,
                config.fallback_budget_window,
                time.time(),
            )
            answer = {**usage.as_dict(), "table": table}
    except dynamodb.exceptions.ResourceNotFoundException:
        raise OperatorError(
            f"DynamoDB table {table} ({settings.ENV_FALLBACK_BUDGET_TABLE}, named by "
            f"{targets.source}) does not exist",
            "deploy the stack, or pass --stack NAME to read a deployed stack's table",
        ) from None
    print(json.dumps(answer, indent=2))
    return 0
