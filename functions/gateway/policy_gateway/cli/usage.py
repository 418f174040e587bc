"""`policy-gateway usage`: who spent what, from the limits' table (LIMITS_TABLE).

    policy-gateway usage [--day|--month] [--top N]    the top spenders, most first
    policy-gateway usage --caller NAME                 that caller's capacity under each limit

Read from this shell's environment, or with --stack a deployed stack's function
environment (its LIMITS_TABLE, and the limits of its policy document).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from .. import settings
from .commands import say

DEFAULT_TOP = 10


def register(commands: Any, targeted: Callable[[argparse.ArgumentParser], None]) -> None:
    spent = commands.add_parser(
        "usage",
        help="print spend and tokens per caller (top spenders), or a caller's remaining "
        "capacity under each of its limits",
    )
    period = spent.add_mutually_exclusive_group()
    period.add_argument(
        "--day",
        action="store_const",
        dest="period",
        const="day",
        help="today's spend, UTC (the default)",
    )
    period.add_argument(
        "--month",
        action="store_const",
        dest="period",
        const="month",
        help="this month's spend, UTC",
    )
    spent.add_argument("--caller", help="as logged in `caller`: show its remaining capacity")
    spent.add_argument("--groups", help="the caller's groups, comma-separated, in order")
    spent.add_argument(
        "--top",
        type=int,
        default=DEFAULT_TOP,
        help="how many callers to list (default %(default)s)",
    )
    targeted(spent)
    spent.set_defaults(handler=usage, period="day")


def usage(args: argparse.Namespace) -> int:
    from ..limits.report import capacity, top_spenders
    from .operator_errors import OperatorError
    from .operator_targets import resolve

    targets = resolve(args.stack, args.region)
    table = targets.config.limits_table
    if not table:
        say(
            f"{settings.ENV_LIMITS_TABLE} is not set in {targets.source}: each gateway "
            "process counts its callers' limits itself, and only it can read them"
        )
        return 2
    dynamodb = targets.client("dynamodb")
    now = time.time()
    try:
        if args.caller:
            limits = _limits(targets, args.caller, (args.groups or "").split(","))
            answer: dict[str, Any] = {
                "table": table,
                "caller": args.caller,
                "limits": capacity(dynamodb, table, args.caller, limits, now),
            }
        else:
            answer = {
                "table": table,
                "period": args.period,
                "callers": [
                    spender.as_dict()
                    for spender in top_spenders(dynamodb, table, args.period, now, args.top)
                ],
            }
    except dynamodb.exceptions.ResourceNotFoundException:
        raise OperatorError(
            f"DynamoDB table {table} ({settings.ENV_LIMITS_TABLE}, named by "
            f"{targets.source}) does not exist",
            "deploy the stack, or pass --stack NAME to read a deployed stack's table",
        ) from None
    print(json.dumps(answer, indent=2))
    return 0


def _limits(targets: Any, caller: str, groups: list[str]) -> Any:
    """The caller's limits in the document in force: the parameter's, else POLICY_CONFIG."""
    from ..limits.config import parse

    text = targets.config.policy_config
    if targets.config.policy_config_parameter or not text:
        text = targets.existing_parameter(targets.policy_config_parameter, "the policy chain")[
            "Value"
        ]
    return parse(text).resolve(caller, [group for group in groups if group])
