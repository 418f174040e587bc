"""`policy-gateway`: serve the gateway, and steer a deployed one through SSM.

    policy-gateway serve [--host H] [--port P] [--simulate-upstream] [--embedded-ssm]
    policy-gateway flag on|off|status
    policy-gateway policy show|set FILE
    policy-gateway init [--stack NAME] [--region R]
    policy-gateway doctor --stack NAME [--region R] [--url URL]
    policy-gateway budget CALLER

The operator commands honour the standard AWS SDK environment (region,
profile, AWS_ENDPOINT_URL_SSM, AWS_ENDPOINT_URL_DYNAMODB). The first-run
stand-ins (an embedded SSM, which also serves the fallback budget's table, and
an upstream simulator) start only when asked for, and never replace an
endpoint that is configured.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from . import settings

_LOCAL_REGION = "us-east-1"
FLAG_VALUES = {"on": "true", "off": "false"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _start_simulator() -> str:
    import uvicorn

    from .simulator import create_simulator

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_simulator(), host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True, name="upstream-simulator").start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}"


def _start_embedded_ssm(port: int) -> str:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        raise SystemExit(
            "--embedded-ssm needs the dev dependencies: pip install -e '.[dev]'"
        ) from None
    # moto's web server logs every request; the gateway's own lines are what matter here.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    os.environ.setdefault("AWS_REGION", _LOCAL_REGION)
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])
    os.environ["AWS_ENDPOINT_URL_SSM"] = endpoint
    if not os.environ.get("AWS_ENDPOINT_URL_DYNAMODB"):
        _serve_budget_table(endpoint)
    config = settings.Settings.from_env()
    ssm = _ssm()
    ssm.put_parameter(**_flag_parameter(config.flag_parameter, FLAG_VALUES["off"]), Overwrite=True)
    if config.policy_config_parameter:
        ssm.put_parameter(
            Name=config.policy_config_parameter,
            Value=config.policy_config or settings.EMPTY_POLICY_CHAIN,
            Type="String",
            Overwrite=True,
        )
    return endpoint


def _serve_budget_table(endpoint: str) -> None:
    """Keep the fallback budget in the stand-in's DynamoDB, as a deployed gateway does."""
    from .budget import create_table, dynamodb_client

    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    table = os.environ.setdefault(
        settings.ENV_FALLBACK_BUDGET_TABLE, settings.LOCAL_FALLBACK_BUDGET_TABLE
    )
    create_table(dynamodb_client(), table)


def _budget_line(config: settings.Settings) -> str:
    if config.fallback_budget <= 0:
        return f"fallback budget: {settings.ENV_FALLBACK_BUDGET}=0, the fallback never fires"
    where = (
        f"in DynamoDB table {config.fallback_budget_table}, shared by every instance"
        if config.fallback_budget_table
        else f"kept in this process (set {settings.ENV_FALLBACK_BUDGET_TABLE} to share it)"
    )
    return (
        f"fallback budget: {config.fallback_budget} per caller per "
        f"{config.fallback_budget_window} s, {where}"
    )


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .app import create_app

    if args.simulate_upstream:
        if os.environ.get(settings.ENV_UPSTREAM_BASE_URL):
            _say(f"{settings.ENV_UPSTREAM_BASE_URL} is set; not starting the upstream simulator")
        else:
            os.environ[settings.ENV_UPSTREAM_BASE_URL] = _start_simulator()
            _say(f"upstream simulator: {os.environ[settings.ENV_UPSTREAM_BASE_URL]}")
    if args.embedded_ssm:
        if os.environ.get("AWS_ENDPOINT_URL_SSM"):
            _say("AWS_ENDPOINT_URL_SSM is set; not starting the embedded SSM")
        else:
            endpoint = _start_embedded_ssm(args.embedded_ssm_port)
            _say(
                f"embedded SSM: {endpoint} (toggle the fallback flag with: "
                f"AWS_ENDPOINT_URL_SSM={endpoint} AWS_REGION={os.environ['AWS_REGION']} "
                "AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local policy-gateway flag on)"
            )
            if os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") == endpoint:
                _say(
                    f"embedded DynamoDB: {endpoint} (a caller's fallback budget with: "
                    f"AWS_ENDPOINT_URL_DYNAMODB={endpoint} "
                    f"{settings.ENV_FALLBACK_BUDGET_TABLE}="
                    f"{os.environ[settings.ENV_FALLBACK_BUDGET_TABLE]} "
                    f"AWS_REGION={os.environ['AWS_REGION']} "
                    "AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local "
                    "policy-gateway budget CALLER)"
                )
    config = settings.Settings.from_env()
    _say(f"policy gateway on http://{args.host}:{args.port} -> {config.upstream_base_url}")
    _say(_budget_line(config))
    uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=args.host,
            port=args.port,
            log_level=os.environ.get("UVICORN_LOG_LEVEL", "warning"),
            access_log=False,
            lifespan="on",
            # The Lambda Web Adapter pools connections to this server across
            # frozen periods; closing idle ones after uvicorn's default 5 s
            # makes the adapter reuse dead sockets (502s).
            timeout_keep_alive=3600 if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else 5,
        )
    ).run()
    return 0


def _ssm(region: str | None = None) -> Any:
    import boto3

    # botocore reads AWS_DEFAULT_REGION only; Lambda and most shells set AWS_REGION.
    return boto3.client("ssm", region_name=region or os.environ.get("AWS_REGION") or None)


def _flag_parameter(name: str, value: str) -> dict[str, str]:
    # The pattern makes SSM itself refuse a typo ("ture", "on") from any writer
    # (console, aws cli) instead of the gateway reading it as off.
    return {
        "Name": name,
        "Value": value,
        "Type": "String",
        "AllowedPattern": settings.FLAG_ALLOWED_PATTERN,
        "Description": "Policy Gateway passthrough fallback: true or false",
    }


def _parameter_status(name: str, ttl: float) -> dict[str, Any]:
    parameter = _ssm().get_parameter(Name=name)["Parameter"]
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
        _ssm().put_parameter(
            **_flag_parameter(config.flag_parameter, FLAG_VALUES[args.action]), Overwrite=True
        )
    status = _parameter_status(config.flag_parameter, config.flag_ttl)
    from .flag import parse_flag

    status["fallback_enabled"] = parse_flag(status["value"]) is True
    print(json.dumps(status, indent=2))
    return 0


def policy(args: argparse.Namespace) -> int:
    from gateway_policies import PolicyConfigError, load_chain

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
            _say(f"refusing to write an invalid policy chain: {exc}")
            return 2
        _ssm().put_parameter(Name=name, Value=text, Type="String", Overwrite=True)
        _say(f"wrote {len(chain.policies)} policies to {name}: {', '.join(chain.names) or '-'}")
    status = _parameter_status(name, config.policy_config_ttl)
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
    ssm = _ssm(args.region)
    initial = [
        _flag_parameter(flag_name, FLAG_VALUES["off"]),
        {
            "Name": chain_name,
            "Value": settings.EMPTY_POLICY_CHAIN,
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
    from .doctor import main as run_doctor

    return run_doctor(args.stack, args.region, args.url)


def budget(args: argparse.Namespace) -> int:
    config = settings.Settings.from_env()
    if not config.fallback_budget_table:
        _say(
            f"{settings.ENV_FALLBACK_BUDGET_TABLE} is not set: each gateway process keeps its own "
            "fallback budget, which only it can read"
        )
        return 2
    from .budget import dynamodb_client, read_usage

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="policy-gateway", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve the gateway over HTTP")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=8080)
    run.add_argument(
        "--simulate-upstream",
        action="store_true",
        help="answer with a built-in Messages API simulator (unless UPSTREAM_BASE_URL is set)",
    )
    run.add_argument(
        "--embedded-ssm",
        action="store_true",
        help="keep the flag in an embedded SSM stand-in (unless AWS_ENDPOINT_URL_SSM is set)",
    )
    run.add_argument("--embedded-ssm-port", type=int, default=8787)
    run.set_defaults(handler=serve)
    toggle = commands.add_parser("flag", help="read or set the passthrough-fallback flag")
    toggle.add_argument("action", choices=["on", "off", "status"])
    toggle.set_defaults(handler=flag)
    chain = commands.add_parser("policy", help="read or set the policy chain parameter")
    chain.add_argument("action", choices=["show", "set"])
    chain.add_argument("file", nargs="?")
    chain.set_defaults(handler=policy)
    setup = commands.add_parser(
        "init", help="create the flag and policy chain parameters if absent (never overwrites)"
    )
    setup.add_argument("--stack", help="take the parameter names from this stack's function")
    setup.add_argument("--region")
    setup.set_defaults(handler=init)
    check = commands.add_parser("doctor", help="check a deployed stack (read-only)")
    check.add_argument("--stack", required=True)
    check.add_argument("--region")
    check.add_argument(
        "--url", help="check /healthz here instead of the Function URL (e.g. a custom domain)"
    )
    check.set_defaults(handler=doctor)
    spent = commands.add_parser(
        "budget", help="print a caller's use of the fallback budget in the current window"
    )
    spent.add_argument(
        "caller", help="as logged in `caller`: a key name, key:<digest> or a principal ARN"
    )
    spent.set_defaults(handler=budget)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.command == "serve":
            raise
        _say(f"policy-gateway {args.command}: {type(exc).__name__}: {exc}")
        return 1
