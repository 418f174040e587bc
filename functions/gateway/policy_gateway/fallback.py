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
from functools import cached_property
from typing import Any

from gateway_policies import PolicyChain, PolicyContext
from gateway_policies.diff import changed_paths

from . import metrics, settings
from .flag import FallbackFlag
from .logs import logger
from .relay import UpstreamStatusError

FALLBACK_STATUSES = frozenset({400, 404, 413, 422})


@dataclass(frozen=True)
class Attempted:
    """What was sent upstream on the first attempt."""

    original: bytes
    sent: bytes
    modified: object

    @cached_property
    def original_document(self) -> Any:
        """The original, parsed once on the error path (it parsed when the call came in)."""
        return json.loads(self.original)

    def differs(self) -> bool:
        if self.sent is self.original:
            return False
        return bool(self.original_document != self.modified)


async def should_fall_back(
    error: UpstreamStatusError, attempted: Attempted, chain: PolicyChain, flag: FallbackFlag
) -> bool:
    """The five conditions, cheapest first: the flag (maybe an SSM read) only when the rest hold."""
    if error.status not in FALLBACK_STATUSES or not attempted.differs():
        return False
    if not chain.bypassable:
        if await flag.enabled():
            logger.info(
                "passthrough fallback not taken: the chain has non-bypassable policies",
                extra={"fallback_status": error.status, "non_bypassable": chain.blockers},
            )
        return False
    return await flag.enabled()


async def record(
    error: UpstreamStatusError,
    attempted: Attempted,
    chain: PolicyChain,
    ctx: PolicyContext,
) -> None:
    """Make the fallback loud, before the retry: metric, trace annotations, WARNING log.

    The metric is flushed here, not at the end of the call, so the alarm sees
    the fallback even if the retry outlives the Lambda invocation.
    """
    metrics.count(settings.METRIC_FALLBACK)
    metrics.flush()
    error.span.annotate(settings.ANNOTATION_FALLBACK, True)
    error.span.annotate(settings.ANNOTATION_FALLBACK_STATUS, error.status)
    replay = PolicyContext(endpoint=ctx.endpoint, stream=ctx.stream, call_id=ctx.call_id)
    attribution = await chain.attribute_changes(attempted.original, replay)
    if attribution:
        error.span.annotate("fallback_policies", ",".join(sorted(attribution)))
    logger.warning(
        "passthrough fallback: upstream rejected the policy-modified request; "
        "retrying once with the original request",
        extra={
            "call_id": ctx.call_id,
            "fallback_status": error.status,
            "upstream_error": error.message,
            "upstream_request_id": error.request_id,
            "changed_paths": changed_paths(attempted.original_document, attempted.modified),
            "changed_by_policy": attribution,
        },
    )
