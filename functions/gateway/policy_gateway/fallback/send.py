"""Sending with the retry ladder: the first attempt, a repair, the fallback, and their record.

`Fallback.send` owns a call's attempts on the Messages route. On a
request-shaped 4xx (400/404/413/422) of a request the chain changed, before
the first stream event, at most one rung each, in this order, so never more
than three upstream attempts:

1. repair (no flag needed): the policies' own repair hooks
   (`on_upstream_error`) change what was sent, keeping every policy's intent
   (structural repairs happen before the first attempt: repair.py);
2. fallback: all conditions of the design contract must hold,
   1. the flag is on;
   2. the upstream's status is 400, 404, 413 or 422 (never 401/403, 429, 5xx);
   3. the body sent differs from the original (as parsed JSON);
   4. for a stream, no upstream event has been received (guaranteed here: only a
      status error, which comes before any event, reaches this module);
   5. the fallback keeps every non-bypassable policy's change: it sends the
      original with their request hooks re-applied (`narrow`), or the original
      itself when the chain has none (`full`), and nothing when that is what
      was already sent;
3. nothing more: the last rung's error goes to the client as the upstream gave it.

Both rungs that cost an upstream call spend one of the caller's fallback
budget, so repairs cannot multiply a caller's upstream calls beyond it.

The original is the body as it arrived, kept as the immutable bytes object
the server handed us: keeping it costs nothing, and no policy mutation,
however deep, can reach it. Parsing, comparing and replaying it run on the
worker loop (offload.py), like the request hooks themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from gateway_policies import PolicyContext, recorder
from gateway_policies.runtime.diff import changed_locations, format_paths

from .. import names, offload
from ..auth.authenticator import Credentials
from ..call import FALLBACK_DENIED, FALLBACK_FAILED, FALLBACK_RETRYING, FALLBACK_SUCCEEDED, Call
from ..observability import metrics
from ..observability.logs import logger
from ..upstream.client import UpstreamResponse
from ..upstream.errors import UpstreamStatusError, UpstreamUnavailable
from . import repair_record
from .budget import FallbackBudget
from .flag import FallbackFlag
from .ladder import FallbackRequest, fallback_request, policy_repair
from .prepared import PreparedRequest

FALLBACK_STATUSES = frozenset({400, 404, 413, 422})
# The log names at most this many changed paths: a policy that rewrote a
# million tiny objects must not write a million paths into one line.
MAX_LOGGED_PATHS = 50


class Send(Protocol):
    """The route's one way upstream (`Gateway.send`): one body, under a span label."""

    def __call__(
        self, call: Call, body: bytes, label: str, *, stream: bool
    ) -> Awaitable[UpstreamResponse]: ...


class Fallback:
    """The flag and the per-caller budget, and what a call does with them."""

    def __init__(self, flag: FallbackFlag, budget: FallbackBudget) -> None:
        self.flag = flag
        self.budget = budget

    async def send(self, call: Call, prepared: PreparedRequest, send: Send) -> UpstreamResponse:
        """The answer of the ladder's last attempt (policy, repair, fallback).

        Raises the upstream's error (UpstreamStatusError, UpstreamUnavailable)
        of whichever attempt was the last.
        """
        try:
            return await send(call, prepared.sent, names.LABEL_POLICY, stream=call.stream)
        except UpstreamStatusError as error:
            failed = error
        try:
            repaired = await self._repairs(call, failed, prepared)
        except BaseException:
            failed.span.end()
            raise
        if repaired:
            failed.span.end()
            try:
                return await send(call, prepared.sent, names.LABEL_REPAIR, stream=call.stream)
            except UpstreamStatusError as error:
                failed = error
        try:
            retry = await self._falls_back(call, failed, prepared)
            if retry is not None:
                await record(failed, prepared, call.credentials, retry)
        finally:
            failed.span.end()
        if retry is None:
            raise failed
        call.fallback = FALLBACK_RETRYING
        try:
            upstream = await send(call, retry.body, names.LABEL_FALLBACK, stream=call.stream)
        except (UpstreamStatusError, UpstreamUnavailable):
            call.fallback = FALLBACK_FAILED
            metrics.count(names.METRIC_FALLBACK_FAILED)
            raise
        call.fallback = FALLBACK_SUCCEEDED
        metrics.count(names.METRIC_FALLBACK_SUCCEEDED)
        return upstream

    async def _repairs(
        self, call: Call, error: UpstreamStatusError, prepared: PreparedRequest
    ) -> bool:
        """The repair rung: the policies' own repairs of what was sent, recorded, budget spent."""
        if (
            error.status not in FALLBACK_STATUSES
            or prepared.sent is prepared.original
            or not prepared.chain.offers_repairs
        ):
            return False
        repaired = await offload.run(policy_repair(error, prepared))
        if repaired is None or not await self.budget.allows(call.caller, rung="policy repair"):
            return False
        repair_record.record(repaired.repairs, prepared.ctx, prepared.chain, error.span)
        prepared.repaired(repaired.request)
        return True

    async def _falls_back(
        self, call: Call, error: UpstreamStatusError, prepared: PreparedRequest
    ) -> FallbackRequest | None:
        """The fallback rung's request, when every condition holds and the budget has room."""
        if not (
            prepared.chain.has_request_hooks and await should_fall_back(error, prepared, self.flag)
        ):
            return None
        retry = await offload.run(fallback_request(prepared))
        if retry is None:
            return None
        # The budget is spent only when everything else allows the fallback,
        # and before anything records it.
        if not await self.budget.allows(call.caller):
            call.fallback = FALLBACK_DENIED
            return None
        return retry


async def should_fall_back(
    error: UpstreamStatusError, prepared: PreparedRequest, flag: FallbackFlag
) -> bool:
    """The cheap conditions first: the status, a changed request, the flag."""
    if error.status not in FALLBACK_STATUSES or prepared.sent is prepared.original:
        return False
    return await flag.enabled()


async def record(
    error: UpstreamStatusError,
    prepared: PreparedRequest,
    credentials: Credentials,
    retry: FallbackRequest,
) -> None:
    """Make the fallback loud, before the retry: metric, trace annotations, WARNING log.

    The metric is flushed here, not at the end of the call, so the alarm sees
    the fallback even if the retry outlives the Lambda invocation. Nothing
    here may stop the fallback: a record that cannot be completed says so.
    The log names the upstream error's type and request id, never its message
    (an unknown-model 404 repeats the client's text), scrubbed of the call's
    credentials like the client's copy and bounded like every word it did not
    choose (gateway_policies.recorder); the paths name the request's
    structure only (gateway_policies.runtime.diff).
    """
    metrics.count(names.METRIC_FALLBACK)
    metrics.metadata(names.ANNOTATION_FALLBACK_SCOPE, retry.scope)
    metrics.flush()
    ctx = prepared.ctx
    repair_record.record(retry.repairs, ctx, prepared.chain, error.span)
    details: dict[str, Any] = {}
    try:
        error.span.annotate(names.ANNOTATION_FALLBACK, True)
        error.span.annotate(names.ANNOTATION_FALLBACK_STATUS, error.status)
        error.span.annotate(names.ANNOTATION_FALLBACK_SCOPE, retry.scope)
        paths, attribution = await offload.run(_attribute(prepared, ctx.replay()))
        details = {"changed_paths": paths, "changed_by_policy": attribution}
        if attribution:
            error.span.annotate(names.ANNOTATION_FALLBACK_POLICIES, ",".join(sorted(attribution)))
    except Exception as exc:
        details = {"record_error": type(exc).__name__}
    logger.warning(
        "passthrough fallback: upstream rejected the policy-modified request; "
        "retrying once with the original request"
        + (" and the non-bypassable policies' changes" if retry.kept else ""),
        extra={
            "call_id": ctx.call_id,
            "fallback_scope": retry.scope,
            "bypassed_policies": retry.bypassed,
            "kept_policies": retry.kept,
            "fallback_status": error.status,
            "upstream_error_type": _upstream_word(credentials, error.error_type),
            "upstream_request_id": _upstream_word(credentials, error.request_id),
            **details,
        },
    )


def _upstream_word(credentials: Credentials, value: str | None) -> str | None:
    """A word the upstream chose, as the record keeps it: scrubbed whole, then bounded."""
    scrubbed = credentials.scrub_text(value)
    return None if scrubbed is None else recorder.text(scrubbed)


async def _attribute(
    prepared: PreparedRequest, ctx: PolicyContext
) -> tuple[list[str], dict[str, list[str]]]:
    """The paths the chain changed, and which policy changed which (consumes the parse)."""
    document = prepared.document()
    locations = changed_locations(document, prepared.modified, limit=MAX_LOGGED_PATHS + 1)
    paths = format_paths(locations[:MAX_LOGGED_PATHS])
    if len(locations) > MAX_LOGGED_PATHS:
        paths.append("<more paths not listed>")
    attribution = await prepared.chain.attribute_changes(
        document, locations[:MAX_LOGGED_PATHS], ctx
    )
    return paths, attribution
