"""A policy chain file as the operator hands it in: read, validated, compared with the live one.

Validation is the gateway's own (gateway_policies.load_document builds every
policy of every chain, the callers' too, with its options), so a file that
passes here loads in the gateway.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .operator_errors import OperatorError

if TYPE_CHECKING:
    from gateway_policies import PolicyChain, PolicyDocument


def chain_summary(chain: PolicyChain) -> str:
    """One chain in a line: its enforced policies in order, then its shadow ones."""
    shadow = chain.shadow.names
    if not chain.names and not shadow:
        return "an empty chain: no policy runs, requests go upstream unchanged"
    enforced = f"{len(chain.names)} policies: {', '.join(chain.names) or 'none'}"
    return f"{enforced}; shadow: {', '.join(shadow)}" if shadow else enforced


@dataclass(frozen=True)
class ChainFile:
    path: str
    text: str
    document: PolicyDocument

    @property
    def summary(self) -> str:
        """The default chain, and the `callers` keys that have their own."""
        default = chain_summary(self.document.default)
        keys = self.document.caller_keys
        return f"{default}; callers: {', '.join(keys)}" if keys else default


def read_chain_file(path: str) -> ChainFile:
    from gateway_policies import PolicyConfigError, load_document

    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        document = load_document(text)
    except PolicyConfigError as exc:
        raise OperatorError(
            f"{path} is not a valid policy chain: {exc}", _next_step(exc), exit_code=2
        ) from None
    return ChainFile(path, text, document)


def _next_step(exc: BaseException) -> str:
    """For a policy module Python cannot find, how to put it on the import path."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ModuleNotFoundError):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return "fix the file"
    return (
        f"if {cause.name} is your policy's module, put its folder on the import path: "
        f"PYTHONPATH=<its folder> policy-gateway policy validate ..., or move it into "
        "layers/policies/ (the layer's folder, on the path of a deployed gateway)"
    )


def inline_chain_problem(text: str) -> str | None:
    """Why an inline chain (POLICY_CONFIG) cannot load, in a line; None when it can.

    `serve` refuses to start on it: an inline chain cannot change while the process
    lives, so a broken one would answer every call with a 500 (a chain in SSM keeps its
    last good version instead, and the operator can fix the parameter).
    """
    from gateway_policies import PolicyConfigError, load_document

    try:
        load_document(text)
    except PolicyConfigError as exc:
        return " ".join(str(exc).split())
    return None


def _canonical(text: str) -> list[str]:
    # Key order and whitespace are not changes the gateway can see.
    try:
        document = json.loads(text)
    except ValueError:
        return text.splitlines()
    return json.dumps(document, indent=2, sort_keys=True).splitlines()


def chain_diff(live: str, live_label: str, proposed: ChainFile) -> list[str]:
    """A unified diff from the live chain to the file's; empty when they mean the same."""
    return list(
        difflib.unified_diff(
            _canonical(live),
            _canonical(proposed.text),
            fromfile=live_label,
            tofile=proposed.path,
            lineterm="",
        )
    )
