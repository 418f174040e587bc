"""A policy chain file as the operator hands it in: read, validated, compared with the live one.

Validation is the gateway's own (gateway_policies.load_chain builds every
policy with its options), so a file that passes here loads in the gateway.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from .operator_errors import OperatorError


@dataclass(frozen=True)
class ChainFile:
    path: str
    text: str
    names: list[str]

    @property
    def summary(self) -> str:
        if not self.names:
            return "an empty chain: no policy runs, requests go upstream unchanged"
        return f"{len(self.names)} policies: {', '.join(self.names)}"


def read_chain_file(path: str) -> ChainFile:
    from gateway_policies import PolicyConfigError, load_chain

    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        chain = load_chain(text)
    except PolicyConfigError as exc:
        raise OperatorError(
            f"{path} is not a valid policy chain: {exc}", "fix the file", exit_code=2
        ) from None
    return ChainFile(path, text, chain.names)


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
