"""Which chain of a policy document a caller gets: `policy validate|diff|show --caller`.

Kept apart from the other policy commands so an operator can check, before a
`policy set`, that a key (and its groups) lands on the chain they meant.
"""

from __future__ import annotations

import argparse
from typing import Any

from gateway_policies import PolicyChain, PolicyConfigError, PolicyDocument, load_document

from .policy_file import chain_summary


def describe(chain: PolicyChain) -> dict[str, Any]:
    """A chain as the operator reads it: its name, its enforced policies in the order they
    run, then its shadow ones (which run after them, on copies)."""
    return {
        "chain": chain.name,
        "policies": chain.names,
        "shadow": chain.shadow.names,
    }


def groups_of(args: argparse.Namespace) -> list[str]:
    return [group.strip() for group in (args.groups or "").split(",") if group.strip()]


def resolution(document: PolicyDocument, args: argparse.Namespace) -> dict[str, Any]:
    groups = groups_of(args)
    chain = document.resolve(args.caller, groups)
    return {"caller": args.caller, "groups": groups, **describe(chain)}


def line(document: PolicyDocument, args: argparse.Namespace) -> str:
    """`validate` and `diff`: the caller's chain in a line."""
    groups = groups_of(args)
    chain = document.resolve(args.caller, groups)
    who = f"{args.caller} (groups: {', '.join(groups)})" if groups else args.caller
    return f"{who} gets the {chain.name!r} chain: {chain_summary(chain)}"


def shown(text: str, args: argparse.Namespace) -> dict[str, Any]:
    """What `policy show --caller` adds to the parameter's status: the caller's chain."""
    try:
        document = load_document(text)
    except PolicyConfigError as exc:
        return {"resolution_error": str(exc)}
    return {"resolution": resolution(document, args)}
