"""What a repair is (`Repair`) and how every repair, structural or a policy's own, is recorded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway_policies import PolicyAction, PolicyChain, PolicyContext
from gateway_policies.actions import REPAIR
from gateway_policies.runtime.diff import Location, format_paths

from .. import names
from ..observability import metrics, spans
from ..observability.logs import logger

# The rule a policy's own repair (its `on_upstream_error` hook) is recorded under.
RULE_POLICY_HOOK = "on_upstream_error"

MAX_REPAIR_PATHS = 5
"""Paths a repair's record lists; a body of 200,000 emptied blocks is one record, not 200,000."""


@dataclass(frozen=True)
class Repair:
    """The repairs of one rule that keep one policy's changes valid: how many, and where."""

    policy: str
    rule: str
    paths: list[str]
    """The first MAX_REPAIR_PATHS JSON paths repaired, in the request's order."""
    count: int

    @classmethod
    def at(cls, policy: str, rule: str, locations: Sequence[Location]) -> Repair:
        """The repairs of `rule` at `locations`: all counted, the first few named."""
        paths = format_paths(locations[:MAX_REPAIR_PATHS])
        return cls(policy, rule, paths, len(locations))

    def details(self) -> dict[str, Any]:
        return {"rule": self.rule, "count": self.count, "paths": self.paths}


def record(
    repairs: Sequence[Repair], ctx: PolicyContext, chain: PolicyChain, span: spans.Span
) -> None:
    """Make repairs visible: the metric, the span annotation, one WARNING, the call's actions.

    Paths only, never content, and a few of them: one action per policy and
    rule, and one WARNING for all, however many blocks were repaired. The
    metric counts the repairs per policy, so a policy that keeps breaking
    requests shows in CloudWatch by name.
    """
    if not repairs:
        return
    for repair in repairs:
        metrics.count_by(
            names.METRIC_POLICY_REPAIRS, {names.DIMENSION_POLICY: repair.policy}, repair.count
        )
        policy = chain.policy(repair.policy)
        if policy is not None:
            ctx.record(policy, REPAIR, **repair.details())
        else:
            ctx.actions.append(PolicyAction(repair.policy, REPAIR, repair.details()))
    span.annotate(
        names.ANNOTATION_POLICY_REPAIR, ",".join(sorted({repair.policy for repair in repairs}))
    )
    logger.warning(
        "policy repair: a policy's change broke a rule the upstream enforces; repaired",
        extra={
            "call_id": ctx.call_id,
            "repairs": [{"policy": r.policy, **r.details()} for r in repairs],
        },
    )
