"""The passthrough fallback: when to resend the original request, and how it is recorded.

All five conditions of the contract (shared/DESIGN.md) must hold, else the
upstream's error goes to the client unchanged:

1. the flag is on;
2. the upstream's status is 400, 404, 413 or 422 (never 401/403, 429, 5xx);
3. the body sent differs from the original (as parsed JSON);
4. for a stream, no upstream event has been received (guaranteed here: only a
   status error, which comes before any event, reaches this module);
5. every policy in the chain allows its request changes to be bypassed.

The original is the body as it arrived, kept as the immutable bytes object
the server handed us: keeping it costs nothing, and no policy mutation,
however deep, can reach it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway_policies import PolicyChain, PolicyContext

from . import metrics, settings
from .logs import logger
from .relay import UpstreamStatusError

FALLBACK_STATUSES = frozenset({400, 404, 413, 422})


@dataclass(frozen=True)
class Attempted:
    """What was sent upstream on the first attempt."""

    original: bytes
    sent: bytes
    modified: object

    def differs(self) -> bool:
        if self.sent is self.original:
            return False
        try:
            return bool(json.loads(self.original) != self.modified)
        except ValueError:
            return True


def should_fall_back(
    error: UpstreamStatusError, attempted: Attempted, chain: PolicyChain, flag_on: bool
) -> bool:
    return (
        flag_on and error.status in FALLBACK_STATUSES and chain.bypassable and attempted.differs()
    )


async def record(
    error: UpstreamStatusError,
    attempted: Attempted,
    chain: PolicyChain,
    ctx: PolicyContext,
) -> None:
    """Make the fallback loud, before the retry: metric, trace annotations, WARNING log."""
    metrics.count(settings.METRIC_FALLBACK)
    error.span.annotate(settings.ANNOTATION_FALLBACK, True)
    error.span.annotate(settings.ANNOTATION_FALLBACK_STATUS, error.status)
    attribution = await chain.attribute_changes(attempted.original, ctx)
    if attribution:
        error.span.annotate("fallback_policies", ",".join(sorted(attribution)))
    logger.warning(
        "passthrough fallback: upstream rejected the policy-modified request; "
        "retrying once with the original request",
        extra={
            "call_id": ctx.call_id,
            "fallback_status": error.status,
            "upstream_error": error.message,
            "changed_paths": sorted({p for paths in attribution.values() for p in paths}),
            "changed_by_policy": attribution,
        },
    )
