"""Which chain of a policy document a caller gets: `policy validate|show --caller`.

Kept apart from the other policy commands so an operator can check, before a
`policy set`, that a key (and its groups) lands on the chain they meant.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from gateway_policies import PolicyChain, PolicyConfigError, PolicyDocument, load_document


def describe(chain: PolicyChain) -> dict[str, Any]:
    """A chain as the operator reads it: its name, its enforced policies in the order they
    run, then its shadow ones (which run after them, on copies)."""
    return {
        "chain": chain.name,
        "policies": chain.names,
        "shadow": [policy.label for policy in chain.shadow.policies],
    }


def resolution(document: PolicyDocument, caller: str, groups: list[str]) -> dict[str, Any]:
    return {"caller": caller, "groups": groups, **describe(document.resolve(caller, groups))}


def groups_of(args: argparse.Namespace) -> list[str]:
    return [group.strip() for group in (args.groups or "").split(",") if group.strip()]


def validate(args: argparse.Namespace, say: Any) -> int:
    """Load FILE as the gateway would; print every chain, and the caller's when asked."""
    if not args.file:
        raise SystemExit("policy validate needs a FILE")
    with open(args.file, encoding="utf-8") as handle:
        text = handle.read()
    try:
        document = load_document(text)
    except PolicyConfigError as exc:
        say(f"invalid policy document: {exc}")
        return 2
    answer: dict[str, Any] = {"valid": True, "chains": [describe(c) for c in document.chains]}
    if args.caller:
        answer["resolution"] = resolution(document, args.caller, groups_of(args))
    print(json.dumps(answer, indent=2))
    return 0


def shown(text: str, args: argparse.Namespace) -> dict[str, Any]:
    """What `policy show --caller` adds to the parameter's status: the caller's chain."""
    try:
        document = load_document(text)
    except PolicyConfigError as exc:
        return {"resolution_error": str(exc)}
    return {"resolution": resolution(document, args.caller, groups_of(args))}
