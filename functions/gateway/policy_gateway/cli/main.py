"""`policy-gateway`: serve the gateway, and steer a deployed one through SSM.

    policy-gateway serve [--host H] [--port P] [--simulate-upstream] [--embedded-ssm]
    policy-gateway flag on|off|status
    policy-gateway policy show|set FILE|validate FILE [--caller NAME [--groups G1,G2]]
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
import logging
import os
import socket
import threading
import time

from .. import settings
from .commands import (
    EMPTY_POLICY_CHAIN,
    FLAG_VALUES,
    budget,
    doctor,
    flag,
    flag_parameter,
    init,
    policy,
    say,
    ssm_client,
)

_LOCAL_REGION = "us-east-1"
# The table `serve --embedded-ssm` creates in its local stand-in.
LOCAL_FALLBACK_BUDGET_TABLE = "policy-gateway-fallback-budget"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    ssm = ssm_client()
    ssm.put_parameter(**flag_parameter(config.flag_parameter, FLAG_VALUES["off"]), Overwrite=True)
    if config.policy_config_parameter:
        ssm.put_parameter(
            Name=config.policy_config_parameter,
            Value=config.policy_config or EMPTY_POLICY_CHAIN,
            Type="String",
            Overwrite=True,
        )
    return endpoint


def _serve_budget_table(endpoint: str) -> None:
    """Keep the fallback budget in the stand-in's DynamoDB, as a deployed gateway does."""
    from ..fallback.budget_table import create_table, dynamodb_client

    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    table = os.environ.setdefault(settings.ENV_FALLBACK_BUDGET_TABLE, LOCAL_FALLBACK_BUDGET_TABLE)
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

    from ..app import create_app
    from ..observability import tracing

    try:
        tracing.check_exporter()
    except tracing.ExporterMissing as exc:
        say(f"policy-gateway serve: {exc}")
        return 1
    if args.simulate_upstream:
        if os.environ.get(settings.ENV_UPSTREAM_BASE_URL):
            say(f"{settings.ENV_UPSTREAM_BASE_URL} is set; not starting the upstream simulator")
        else:
            os.environ[settings.ENV_UPSTREAM_BASE_URL] = _start_simulator()
            say(f"upstream simulator: {os.environ[settings.ENV_UPSTREAM_BASE_URL]}")
    if args.embedded_ssm:
        if os.environ.get("AWS_ENDPOINT_URL_SSM"):
            say("AWS_ENDPOINT_URL_SSM is set; not starting the embedded SSM")
        else:
            endpoint = _start_embedded_ssm(args.embedded_ssm_port)
            say(
                f"embedded SSM: {endpoint} (toggle the fallback flag with: "
                f"AWS_ENDPOINT_URL_SSM={endpoint} AWS_REGION={os.environ['AWS_REGION']} "
                "AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local policy-gateway flag on)"
            )
            if os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") == endpoint:
                say(
                    f"embedded DynamoDB: {endpoint} (a caller's fallback budget with: "
                    f"AWS_ENDPOINT_URL_DYNAMODB={endpoint} "
                    f"{settings.ENV_FALLBACK_BUDGET_TABLE}="
                    f"{os.environ[settings.ENV_FALLBACK_BUDGET_TABLE]} "
                    f"AWS_REGION={os.environ['AWS_REGION']} "
                    "AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local "
                    "policy-gateway budget CALLER)"
                )
    config = settings.Settings.from_env()
    say(f"policy gateway on http://{args.host}:{args.port} -> {config.upstream_base_url}")
    say(_budget_line(config))
    uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=args.host,
            port=args.port,
            log_level=config.server_log_level,
            access_log=False,
            lifespan="on",
            # The Lambda Web Adapter pools connections to this server across
            # frozen periods; closing idle ones after uvicorn's default 5 s
            # makes the adapter reuse dead sockets (502s).
            timeout_keep_alive=3600 if config.trust_lambda_context else 5,
        )
    ).run()
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
    chain.add_argument("action", choices=["show", "set", "validate"])
    chain.add_argument("file", nargs="?")
    chain.add_argument("--caller", help="also show which chain this caller gets")
    chain.add_argument("--groups", help="the caller's groups, comma-separated, in order")
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
        say(f"policy-gateway {args.command}: {type(exc).__name__}: {exc}")
        return 1
