"""What a policy did on a call, as the audit trail records it.

Every decision a policy takes (a tool call blocked, a secret redacted, a field
capped, a request refused, a repair...) is one `PolicyAction`, recorded with
`PolicyContext.record`. The gateway writes a call's actions on its log line
(`policy_actions`) and counts them in CloudWatch, so the vocabulary is small
and fixed: an operator's query or alarm names these words, and a typo in a
custom policy must fail its tests, not invent a metric nobody watches.

Details are for the audit, so they never hold request or response content:
kinds, counts, names, JSON paths; never a secret's text. Whatever a policy
passes, an action keeps its details bounded (`recorder.details`): a name the
client or the model chose keeps its first 64 characters, so a long one can
neither swell the call's log line nor carry content into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import recorder

BLOCK = "block"
REDACT = "redact"
REWRITE = "rewrite"
CAP = "cap"
STRIP = "strip"
INJECT = "inject"
REFUSE = "refuse"
JUDGE = "judge"
REPAIR = "repair"

ACTIONS = frozenset({BLOCK, REDACT, REWRITE, CAP, STRIP, INJECT, REFUSE, JUDGE, REPAIR})
"""Every action a policy may record: the `action` dimension of the PolicyActions metric."""


@dataclass(frozen=True)
class PolicyAction:
    """One thing one policy did (or, in shadow mode, would have done) on one call."""

    policy: str
    action: str
    details: Mapping[str, Any] = field(default_factory=dict)
    shadow: bool = False

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(
                f"{self.policy}: unknown policy action {self.action!r}; "
                f"one of {', '.join(sorted(ACTIONS))}"
            )
        clash = {"policy", "action", "shadow"} & set(self.details)
        if clash:
            raise ValueError(f"{self.policy}: a detail may not be named {sorted(clash)}")
        object.__setattr__(self, "details", recorder.details(self.details))

    def as_json(self) -> dict[str, Any]:
        """The log line's entry: `{"policy", "action", **details}`, plus `"shadow": true`."""
        entry: dict[str, Any] = {"policy": self.policy, "action": self.action, **self.details}
        if self.shadow:
            entry["shadow"] = True
        return entry
