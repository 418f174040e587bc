"""The passthrough fallback: send with it, when to resend the original, and how it is recorded.

`Fallback.send` owns a call's attempts on the Messages route: the first one
(the policy-modified request), the decision, the record, the retry with the
original, and every fallback metric.

All five conditions of the design contract (README: "The passthrough
fallback, and its trade-off") must hold, else the upstream's error goes to the
client unchanged:

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
from collections.abc import Awaitable
from typing import Any, Protocol

from gateway_policies import PolicyChain, PolicyContext
from gateway_policies.runtime.diff import changed_locations, format_path

from .. import names, offload
from ..auth.authenticator import Credentials
from ..call import FALLBACK_DENIED, FALLBACK_FAILED, FALLBACK_RETRYING, FALLBACK_SUCCEEDED, Call
from ..observability import metrics
from ..observability.logs import logger
from ..upstream.client import UpstreamResponse
from ..upstream.errors import UpstreamStatusError, UpstreamUnavailable
from .budget import FallbackBudget
from .flag import FallbackFlag

FALLBACK_STATUSES = frozenset({400, 404, 413, 422})
# The log names at most this many changed paths: a policy that rewrote a
# million tiny objects must not write a million paths into one line.
MAX_LOGGED_PATHS = 50
_UNPARSED = object()


class Send(Protocol):
    """The route's one way upstream (`GatewayEndpoint._send`): one body, under a span label."""

    def __call__(
        self, call: Call, body: bytes, label: str, *, stream: bool
    ) -> Awaitable[UpstreamResponse]: ...


class PreparedRequest:
    """The request a call prepared, before any attempt: the original, what the chain made
    of it, and how.

    The original is parsed at most once, and only on the error path; the
    fallback's record then replays the request hooks on that same parse, so
    the error path holds two documents at most (the one sent and this one).
    """

    def __init__(
        self,
        original: bytes,
        sent: bytes,
        modified: object,
        chain: PolicyChain,
        ctx: PolicyContext,
    ) -> None:
        self.original = original
        self.sent = sent
        self.modified = modified
        self.chain = chain
        self.ctx = ctx
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


class Fallback:
    """The flag and the per-caller budget, and what a call does with them."""

    def __init__(self, flag: FallbackFlag, budget: FallbackBudget) -> None:
        self.flag = flag
        self.budget = budget

    async def send(self, call: Call, prepared: PreparedRequest, send: Send) -> UpstreamResponse:
        """The first attempt's answer, or the original's when the fallback fires.

        Raises the upstream's error (UpstreamStatusError, UpstreamUnavailable)
        of whichever attempt was the last.
        """
        try:
            return await send(call, prepared.sent, names.LABEL_POLICY, stream=call.stream)
        except UpstreamStatusError as error:
            try:
                fall_back = await self._allows(call, error, prepared)
                if fall_back:
                    await record(error, prepared, call.credentials)
            finally:
                error.span.end()
            if not fall_back:
                raise
        call.fallback = FALLBACK_RETRYING
        try:
            upstream = await send(call, prepared.original, names.LABEL_FALLBACK, stream=call.stream)
        except (UpstreamStatusError, UpstreamUnavailable):
            call.fallback = FALLBACK_FAILED
            metrics.count(names.METRIC_FALLBACK_FAILED)
            raise
        call.fallback = FALLBACK_SUCCEEDED
        metrics.count(names.METRIC_FALLBACK_SUCCEEDED)
        return upstream

    async def _allows(
        self, call: Call, error: UpstreamStatusError, prepared: PreparedRequest
    ) -> bool:
        if not (
            prepared.chain.has_request_hooks and await should_fall_back(error, prepared, self.flag)
        ):
            return False
        # The budget is spent only when everything else allows the fallback,
        # and before anything records it.
        if not await self.budget.allows(call.caller):
            call.fallback = FALLBACK_DENIED
            return False
        return True


async def should_fall_back(
    error: UpstreamStatusError, prepared: PreparedRequest, flag: FallbackFlag
) -> bool:
    """The five conditions, cheapest first; the original is parsed only when the rest hold."""
    if error.status not in FALLBACK_STATUSES or prepared.sent is prepared.original:
        return False
    if not await flag.enabled():
        return False
    if not prepared.chain.bypassable:
        logger.info(
            "passthrough fallback not taken: the chain has non-bypassable policies",
            extra={
                "fallback_status": error.status,
                "non_bypassable": prepared.chain.non_bypassable,
            },
        )
        return False
    return await offload.run(prepared.differs())


async def record(
    error: UpstreamStatusError, prepared: PreparedRequest, credentials: Credentials
) -> None:
    """Make the fallback loud, before the retry: metric, trace annotations, WARNING log.

    The metric is flushed here, not at the end of the call, so the alarm sees
    the fallback even if the retry outlives the Lambda invocation. Nothing
    here may stop the fallback: a record that cannot be completed says so.
    The log names the upstream error's type and request id, never its message
    (an unknown-model 404 repeats the client's text), scrubbed of the call's
    credentials like the client's copy.
    """
    metrics.count(names.METRIC_FALLBACK)
    metrics.flush()
    ctx = prepared.ctx
    details: dict[str, Any] = {}
    try:
        error.span.annotate(names.ANNOTATION_FALLBACK, True)
        error.span.annotate(names.ANNOTATION_FALLBACK_STATUS, error.status)
        paths, attribution = await offload.run(_attribute(prepared, ctx.replay()))
        details = {"changed_paths": paths, "changed_by_policy": attribution}
        if attribution:
            error.span.annotate(names.ANNOTATION_FALLBACK_POLICIES, ",".join(sorted(attribution)))
    except Exception as exc:
        details = {"record_error": type(exc).__name__}
    logger.warning(
        "passthrough fallback: upstream rejected the policy-modified request; "
        "retrying once with the original request",
        extra={
            "call_id": ctx.call_id,
            "fallback_status": error.status,
            "upstream_error_type": credentials.scrub_text(error.error_type),
            "upstream_request_id": credentials.scrub_text(error.request_id),
            **details,
        },
    )


async def _attribute(
    prepared: PreparedRequest, ctx: PolicyContext
) -> tuple[list[str], dict[str, list[str]]]:
    """The paths the chain changed, and which policy changed which (consumes the parse)."""
    document = prepared.document()
    locations = changed_locations(document, prepared.modified, limit=MAX_LOGGED_PATHS + 1)
    paths = [format_path(location) for location in locations[:MAX_LOGGED_PATHS]]
    if len(locations) > MAX_LOGGED_PATHS:
        paths.append("<more paths not listed>")
    attribution = await prepared.chain.attribute_changes(
        document, locations[:MAX_LOGGED_PATHS], ctx
    )
    return paths, attribution
