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
however deep, can reach it. Parsing, comparing and replaying it run on the
worker loop (offload.py), like the request hooks themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway_policies import PolicyChain, PolicyContext
from gateway_policies.diff import changed_locations, format_path

from . import metrics, offload, settings
from .flag import FallbackFlag
from .logs import logger
from .relay import UpstreamStatusError

FALLBACK_STATUSES = frozenset({400, 404, 413, 422})
# The log names at most this many changed paths: a policy that rewrote a
# million tiny objects must not write a million paths into one line.
MAX_LOGGED_PATHS = 50
_UNPARSED = object()


class Attempted:
    """What was sent upstream on the first attempt, and the original it came from.

    The original is parsed at most once, and only on the error path; the
    fallback's record then replays the request hooks on that same parse, so
    the error path holds two documents at most (the one sent and this one).
    """

    def __init__(self, original: bytes, sent: bytes, modified: object) -> None:
        self.original = original
        self.sent = sent
        self.modified = modified
        self._document: Any = _UNPARSED

    def document(self) -> Any:
        if self._document is _UNPARSED:
            self._document = json.loads(self.original)
        return self._document

    async def differs(self) -> bool:
        if self.sent is self.original:
            return False
        try:
            return bool(self.document() != self.modified)
        except RecursionError:
            # Too deep to compare here; a request hook did run on it, and
            # resending the original costs one call, not a weakened policy.
            return True


async def should_fall_back(
    error: UpstreamStatusError, attempted: Attempted, chain: PolicyChain, flag: FallbackFlag
) -> bool:
    """The five conditions, cheapest first; the original is parsed only when the rest hold."""
    if error.status not in FALLBACK_STATUSES or attempted.sent is attempted.original:
        return False
    if not await flag.enabled():
        return False
    if not chain.bypassable:
        logger.info(
            "passthrough fallback not taken: the chain has non-bypassable policies",
            extra={"fallback_status": error.status, "non_bypassable": chain.blockers},
        )
        return False
    return await offload.run(attempted.differs())


async def record(
    error: UpstreamStatusError,
    attempted: Attempted,
    chain: PolicyChain,
    ctx: PolicyContext,
    scrub: Callable[[bytes], bytes],
) -> None:
    """Make the fallback loud, before the retry: metric, trace annotations, WARNING log.

    The metric is flushed here, not at the end of the call, so the alarm sees
    the fallback even if the retry outlives the Lambda invocation. Nothing
    here may stop the fallback: a record that cannot be completed says so.
    The log names the upstream error's type and request id, never its message
    (an unknown-model 404 repeats the client's text), scrubbed of the call's
    credentials like the client's copy.
    """
    metrics.count(settings.METRIC_FALLBACK)
    metrics.flush()
    details: dict[str, Any] = {}
    try:
        error.span.annotate(settings.ANNOTATION_FALLBACK, True)
        error.span.annotate(settings.ANNOTATION_FALLBACK_STATUS, error.status)
        replay = PolicyContext(endpoint=ctx.endpoint, stream=ctx.stream, call_id=ctx.call_id)
        paths, attribution = await offload.run(_attribute(attempted, chain, replay))
        details = {"changed_paths": paths, "changed_by_policy": attribution}
        if attribution:
            error.span.annotate(
                settings.ANNOTATION_FALLBACK_POLICIES, ",".join(sorted(attribution))
            )
    except Exception as exc:
        details = {"record_error": type(exc).__name__}
    logger.warning(
        "passthrough fallback: upstream rejected the policy-modified request; "
        "retrying once with the original request",
        extra={
            "call_id": ctx.call_id,
            "fallback_status": error.status,
            "upstream_error_type": scrubbed(scrub, error.error_type),
            "upstream_request_id": scrubbed(scrub, error.request_id),
            **details,
        },
    )


def scrubbed(scrub: Callable[[bytes], bytes], text: str | None) -> str | None:
    """An upstream value for a log line, with the call's credentials scrubbed from it."""
    return None if text is None else scrub(text.encode()).decode("utf-8", "replace")


async def _attribute(
    attempted: Attempted, chain: PolicyChain, ctx: PolicyContext
) -> tuple[list[str], dict[str, list[str]]]:
    """The paths the chain changed, and which policy changed which (consumes the parse)."""
    document = attempted.document()
    locations = changed_locations(document, attempted.modified, limit=MAX_LOGGED_PATHS + 1)
    paths = [format_path(location) for location in locations[:MAX_LOGGED_PATHS]]
    if len(locations) > MAX_LOGGED_PATHS:
        paths.append("<more paths not listed>")
    attribution = await chain.attribute_changes(document, locations[:MAX_LOGGED_PATHS], ctx)
    return paths, attribution
