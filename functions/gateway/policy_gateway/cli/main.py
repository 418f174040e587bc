"""`policy-gateway`: serve the gateway, and steer a deployed one through SSM.

    policy-gateway serve [--host H] [--port P] [--simulate-upstream] [--embedded-ssm]
                         [--embedded-ssm-port P]
    policy-gateway flag on|off|status [--stack NAME] [--region R]
    policy-gateway policy show|validate FILE|diff FILE|set FILE [--stack NAME] [--region R]
                          [--caller NAME [--groups G1,G2]]
    policy-gateway init [--stack NAME] [--region R] [--secrets] [--custom-names]
    policy-gateway doctor --stack NAME [--region R] [--url URL]
    policy-gateway budget CALLER|top [--limit N] [--stack NAME] [--region R]
    policy-gateway usage [--day|--month] [--top N] [--caller NAME] [--stack NAME] [--region R]
    policy-gateway logs [--file F] [--stack NAME [--since 10m] [--follow]] [--all]
    policy-gateway keys add NAME [--group G ...] [--expires WHEN]|list
                        |rotate NAME [--grace D] [--expires WHEN]|revoke NAME
                        [--stack NAME] [--region R]
    policy-gateway callers id < KEY
    policy-gateway judge eval --chain FILE --cases FILE.jsonl [--simulate] [--json]
    policy-gateway history list|show ID|serve|delete --caller C [--before DATE]
    policy-gateway --version

The operator commands honour the standard AWS SDK environment (region,
profile, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_SSM, ..._SECRETS_MANAGER,
..._DYNAMODB). The first-run stand-ins (local/standins.py: an embedded SSM, which
also serves Secrets Manager and the fallback budget's table, and an upstream
simulator, of the Messages API or of Bedrock) start only when asked for, and
never replace an endpoint that is configured. With --stack, the operator
commands take every name from that stack's function; they change only what
exists (`init` alone creates), and a failure is one line with the next step.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Any

from .. import settings
from . import history, judge_eval, logs, usage
from .commands import TOP, budget, doctor, flag, init, policy, say
from .keys import add_key_commands
from .operator_errors import explain


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


def _secrets_to_create(config: settings.Settings) -> settings.Settings:
    """In gateway_key mode, what to run while the embedded stand-in holds no secret yet; and
    the config that leaves them unread until a call needs them, so no ERROR line says so."""
    if config.auth_mode != settings.AUTH_GATEWAY_KEY:
        return config
    from .local_secrets import missing_secrets

    missing = missing_secrets(config)
    if not missing:
        return config
    say(
        f"gateway keys: {', '.join(missing)} not created yet; in that other shell, after the "
        "export line, run `policy-gateway init --secrets` (it prints a key); until then every "
        "call is refused"
    )
    return replace(config, warm_secrets=False)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..app import create_app
    from ..auth.web_pages import loopback_hosts
    from ..local.listen import claim
    from ..local.standins import (
        operator_env,
        start_embedded_aws,
        start_simulated_upstream,
        upstream_banner,
    )
    from ..observability import tracing_settings
    from .policy_file import inline_chain_problem

    try:
        tracing_settings.check_exporter()
    except tracing_settings.ExporterMissing as exc:
        say(f"policy-gateway serve: {exc}")
        return 1
    inline = settings.Settings.from_env()
    if inline.policy_config and not inline.policy_config_parameter:
        problem = inline_chain_problem(inline.policy_config)
        if problem:
            say(f"policy-gateway serve: {settings.ENV_POLICY_CONFIG} is not valid: {problem}")
            return 1
    # Every port is claimed or tried before anything starts or is announced.
    listener = claim("gateway", args.host, args.port, "--port, or make run PORT=...")
    embedded = start_embedded_aws(args.embedded_ssm_port, say) if args.embedded_ssm else None
    simulated = None
    if args.simulate_upstream:
        simulated = start_simulated_upstream(settings.Settings.from_env(), say)
    config = settings.Settings.from_env()
    if not config.trust_lambda_context:
        # In Lambda the adapter forwards calls with the Function URL's Host.
        port = listener.getsockname()[1]
        config = replace(config, local_hosts=loopback_hosts(args.host, port))
    if embedded is not None:
        say(f"operator commands against the stand-ins, in another shell: {operator_env(embedded)}")
        config = _secrets_to_create(config)
    say(f"policy gateway on http://{args.host}:{args.port} -> {upstream_banner(config, simulated)}")
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
    ).run(sockets=[listener])
    return 0


# `policy`'s sub-actions, as `policy --help` lists them.
POLICY_ACTIONS = """actions:
  show           print the live chain document and its parameter's version
  validate FILE  check FILE as the gateway would load it (no AWS call)
  diff FILE      compare FILE with the live chain
  set FILE       validate FILE, then write it to the chain parameter"""


def _region(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--region",
        help="AWS region (default: AWS_REGION, then AWS_DEFAULT_REGION, then the profile's)",
    )


def _targeted(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--stack", help="take the names from this stack's function (default: this environment)"
    )
    _region(command)


def _add_serve(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default %(default)s)"
    )
    run.add_argument(
        "--port", type=int, default=8080, help="port to listen on (default %(default)s)"
    )
    run.add_argument(
        "--simulate-upstream",
        action="store_true",
        help="answer with a built-in simulator of the Messages API, or of Bedrock with "
        "UPSTREAM_PROVIDER=bedrock (unless UPSTREAM_BASE_URL, or for Bedrock "
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME, is set)",
    )
    run.add_argument(
        "--embedded-ssm",
        action="store_true",
        help="keep the flag and the chain in an embedded SSM stand-in, which also serves "
        "Secrets Manager and DynamoDB (unless AWS_ENDPOINT_URL_SSM is set)",
    )
    run.add_argument(
        "--embedded-ssm-port",
        type=int,
        default=8787,
        help="the AWS stand-in's port, with --embedded-ssm (default %(default)s)",
    )
    run.set_defaults(handler=serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="policy-gateway", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_serve(commands.add_parser("serve", help="serve the gateway over HTTP"))
    _add_flag(commands)
    _add_policy(commands)
    _add_init(commands)
    _add_doctor(commands)
    _add_budget(commands)
    logs.register(commands)
    usage.register(commands, _targeted)
    judge_eval.register(commands)
    history.register(commands)
    add_key_commands(commands, _targeted)
    return parser


def _add_flag(commands: Any) -> None:
    toggle = commands.add_parser("flag", help="read or set the passthrough-fallback flag")
    toggle.add_argument(
        "action",
        choices=["on", "off", "status"],
        help="turn the passthrough fallback on or off, or print the flag and its TTL",
    )
    _targeted(toggle)
    toggle.set_defaults(handler=flag)


def _add_policy(commands: Any) -> None:
    chain = commands.add_parser(
        "policy",
        help="read, check, compare or set the policy chain parameter",
        epilog=POLICY_ACTIONS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chain.add_argument("action", choices=["show", "validate", "diff", "set"], help="see below")
    chain.add_argument("file", nargs="?", help="a policy chain JSON file (validate, diff, set)")
    _targeted(chain)
    chain.add_argument("--caller", help="also show which chain of the document this caller gets")
    chain.add_argument("--groups", help="the caller's groups, comma-separated, in order")
    chain.set_defaults(handler=policy)


def _add_init(commands: Any) -> None:
    setup = commands.add_parser(
        "init", help="create the flag and policy chain parameters if absent (never overwrites)"
    )
    _targeted(setup)
    setup.add_argument(
        "--secrets",
        action="store_true",
        help="also create gateway_key mode's two secrets, for a local run (a stack has its own)",
    )
    setup.add_argument(
        "--custom-names",
        action="store_true",
        help="create parameter names this shell's environment sets that are not the defaults "
        "(without it such a name is refused as a likely typo)",
    )
    setup.set_defaults(handler=init)


def _add_doctor(commands: Any) -> None:
    check = commands.add_parser("doctor", help="check a deployed stack (read-only)")
    check.add_argument("--stack", required=True, help="the deployed stack to check")
    _region(check)
    check.add_argument(
        "--url", help="check /healthz here instead of the Function URL (e.g. a custom domain)"
    )
    check.set_defaults(handler=doctor)


def _add_budget(commands: Any) -> None:
    spent = commands.add_parser(
        "budget",
        help="print a caller's use of the fallback budget in the current window, "
        "or the callers that used most (top)",
    )
    spent.add_argument(
        "caller",
        help=f"as logged in `caller`: a key name, key:<digest> or a principal ARN; or {TOP}",
    )
    spent.add_argument(
        "--limit", type=int, default=10, help=f"how many callers {TOP} lists (default 10)"
    )
    _targeted(spent)
    spent.set_defaults(handler=budget)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        if args.command == "serve":
            raise
        failure = explain(exc)
        say(f"policy-gateway {args.command}: {failure}")
        return failure.exit_code


def _reader_gone() -> int:
    """What a Unix filter does when the reader of its output leaves (`logs | head -1`): stop,
    quietly, with success. Output still buffered goes to /dev/null, so that the interpreter's
    own flush at exit raises nothing either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("policy-gateway")
    except PackageNotFoundError:
        return "(not installed: pip install -e .)"
