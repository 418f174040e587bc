"""`policy-gateway doctor`: check a deployed stack, read-only.

Each check answers one question an operator has before trusting a gateway
with traffic, and prints OK or what is wrong and how to fix it. Nothing is
written anywhere; the operator's own credentials are used. The checks are
runtime.py (the function's wiring) and values.py (the live values).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

from ..deployment import Deployment, StackNotFound
from . import runtime, values
from .checkup import Checkup, Problem, Result, aws_error

CHECKS: tuple[tuple[str, Callable[[Checkup], str]], ...] = (
    ("stack", runtime.stack),
    ("function", runtime.function),
    ("function URL", runtime.function_url),
    ("layers", runtime.layers),
    ("fallback flag", values.flag),
    ("policy chain", values.policy_chain),
    ("alarms", values.alarms),
    ("health", runtime.health),
)


def run(checkup: Checkup) -> Iterator[Result]:
    for name, check in CHECKS:
        try:
            yield Result(name, True, check(checkup))
        except Problem as problem:
            yield Result(name, False, problem.wrong, problem.fix)
        except Exception as exc:
            yield Result(
                name,
                False,
                f"could not check: {aws_error(exc)}",
                "check the credentials, the region and that they may read the stack",
            )


def main(stack_name: str, region: str | None, url: str | None) -> int:
    checkup = Checkup(Deployment(stack_name, region), url)
    results: list[Result] = []
    try:
        checkup.deployment.stack  # noqa: B018 - a missing stack makes every check moot
    except StackNotFound as missing:
        if missing.stand_in:
            raise  # one line, as every command says it (operator_errors)
        results.append(
            Result(
                "stack",
                False,
                f"no stack named {stack_name} in {region or 'the default region'}",
                "check --stack and --region (`aws cloudformation list-stacks`)",
            )
        )
    else:
        results.extend(run(checkup))
    for result in results:
        print("\n".join(result.lines()), flush=True)
    failed = [result.name for result in results if not result.ok]
    print(
        f"{len(results) - len(failed)} of {len(results)} checks passed"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
        file=sys.stderr,
    )
    return 1 if failed else 0
