"""A chain runs policies in order, and knows what the fallback needs from them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..base import JSONObject, Policy, PolicyContext, StreamEvent, UpstreamErrorInfo
from ..exceptions import PolicyFailure, PolicyViolation
from ..turns import STEPS, in_turns
from .diff import MISSING, Location, format_paths, resolve_each
from .shadow import SHADOW_TIMEOUT_SECONDS, ShadowPolicies

DEFAULT_CHAIN = "default"
"""The name of a document's default chain; a caller's chain is named by its `callers` key."""


class PolicyChain:
    """An ordered, immutable list of configured policies, and its shadow-mode ones.

    `policies` are enforced, in order; `shadow` ones run after them on copies
    (runtime/shadow.py) and never change the call. Everything the fallback
    reads (`bypassable`, `has_request_hooks`, the attribution) is about the
    enforced policies alone.
    """

    def __init__(
        self,
        policies: Sequence[Policy[Any]] = (),
        *,
        shadow: Sequence[Policy[Any]] = (),
        name: str = DEFAULT_CHAIN,
        shadow_timeout: float = SHADOW_TIMEOUT_SECONDS,
    ) -> None:
        self.policies: tuple[Policy[Any], ...] = tuple(policies)
        self.shadow = ShadowPolicies(shadow, shadow_timeout)
        self.name = name
        self._request = [p for p in self.policies if p.implements("on_request")]
        self._response = [p for p in self.policies if p.implements("on_response")]
        self._stream = [
            p
            for p in self.policies
            if p.implements("on_stream_event") or p.implements("on_stream_end")
        ]
        self._repairers = [p for p in self.policies if p.implements("on_upstream_error")]

    @property
    def names(self) -> list[str]:
        return [p.label for p in self.policies]

    @property
    def has_request_hooks(self) -> bool:
        """False when no enforced policy has a request hook: the body goes upstream as received."""
        return bool(self._request)

    @property
    def reads_request(self) -> bool:
        """Whether `apply_request` has anything to run, enforced or shadow."""
        return bool(self._request) or self.shadow.reads_request

    @property
    def reads_response(self) -> bool:
        return bool(self._response) or self.shadow.reads_response

    @property
    def reads_stream(self) -> bool:
        return bool(self._stream) or self.shadow.reads_stream

    @property
    def has_response_hooks(self) -> bool:
        return bool(self._response)

    @property
    def filters_stream(self) -> bool:
        return bool(self._stream)

    @property
    def non_bypassable(self) -> list[str]:
        return [p.label for p in self.policies if not p.bypassable]

    @property
    def bypassed(self) -> list[str]:
        """The request policies whose changes a fallback drops."""
        return [p.label for p in self._request if p.bypassable]

    @property
    def kept(self) -> list[str]:
        """The request policies whose changes a fallback keeps (re-applied to the original)."""
        return [p.label for p in self._request if not p.bypassable]

    @property
    def offers_repairs(self) -> bool:
        return bool(self._repairers)

    def policy(self, label: str) -> Policy[Any] | None:
        return next((p for p in self.policies if p.label == label), None)

    async def apply_kept(self, request: JSONObject, ctx: PolicyContext) -> None:
        """Run only the non-bypassable policies' request hooks: the narrow fallback's request."""
        for policy in self._request:
            if not policy.bypassable:
                async with _guard(policy, "on_request"):
                    await policy.on_request(request, ctx)

    async def repair(
        self, request: JSONObject, error: UpstreamErrorInfo, ctx: PolicyContext
    ) -> list[Policy[Any]]:
        """Offer the upstream's error to every policy with a repair hook; those that changed it."""
        changed: list[Policy[Any]] = []
        for policy in self._repairers:
            async with _guard(policy, "on_upstream_error"):
                if await policy.on_upstream_error(request, error, ctx):
                    changed.append(policy)
        return changed

    async def apply_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        for policy in self._request:
            async with _guard(policy, "on_request"):
                await policy.on_request(request, ctx)
        if self.shadow.reads_request:
            await self.shadow.on_request(request, ctx)

    async def apply_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        for policy in self._response:
            async with _guard(policy, "on_response"):
                await policy.on_response(response, ctx)
        if self.shadow.reads_response:
            await self.shadow.on_response(response, ctx)

    async def apply_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        out = await self._through(self._stream, [event], ctx)
        if self.shadow.reads_stream:
            await self.shadow.on_stream_events(out, ctx)
        return out

    async def apply_stream_end(self, ctx: PolicyContext) -> list[StreamEvent]:
        """Flush each policy in order; what one flushes still passes the policies after it."""
        out: list[StreamEvent] = []
        for index, policy in enumerate(self._stream):
            async with _guard(policy, "on_stream_end"):
                owed = await policy.on_stream_end(ctx)
            out.extend(await self._through(self._stream[index + 1 :], owed, ctx))
        if self.shadow.reads_stream:
            await self.shadow.on_stream_events(out, ctx)
            await self.shadow.on_stream_end(ctx)
        return out

    @staticmethod
    async def _through(
        policies: Sequence[Policy[Any]], events: list[StreamEvent], ctx: PolicyContext
    ) -> list[StreamEvent]:
        for policy in policies:
            if not events:
                break
            passed: list[StreamEvent] = []
            async with _guard(policy, "on_stream_event"):
                for event in events:
                    passed.extend(await policy.on_stream_event(event, ctx))
            events = passed
        return events

    async def attribute_changes(
        self, document: JSONObject, locations: Sequence[Location], ctx: PolicyContext
    ) -> dict[str, list[str]]:
        """Which policy changed which of `locations` (paths only, never content).

        Runs the request hooks again, one at a time, on `document` (a fresh
        parse of the original, changed in place: the caller's to spend).
        Around each hook only the values at `locations` are kept (a string
        as itself, anything else as JSON text), so the replay never copies
        the whole request. It is only called when a fallback is about to
        happen, so the happy path never pays. With one request hook in the
        chain there is nothing to tell apart: every change is that policy's,
        and nothing is replayed.
        """
        if len(self._request) == 1:
            (policy,) = self._request
            return {policy.label: format_paths(locations)} if locations else {}
        attribution: dict[str, list[str]] = {}
        async for policy, changed in self._replay(document, locations, ctx):
            if isinstance(changed, Exception):
                attribution[policy.label] = [f"<replay failed: {type(changed).__name__}>"]
            elif changed:
                attribution[policy.label] = format_paths(locations[i] for i in changed)
        return attribution

    async def changed_first_by(
        self, document: JSONObject, locations: Sequence[Location], ctx: PolicyContext
    ) -> list[str | None]:
        """For each of `locations`, the policy that changed it first, None when no policy
        did (or a replay failed): `attribute_changes` replayed the same way, per location, so
        a repair of 200,000 blocks never formats or looks up 200,000 paths."""
        if len(self._request) == 1:
            return [self._request[0].label] * len(locations)
        owners: list[str | None] = [None] * len(locations)
        async for policy, changed in self._replay(document, locations, ctx):
            if not isinstance(changed, Exception):
                for index in changed:
                    owners[index] = owners[index] or policy.label
        return owners

    async def _replay(
        self, document: JSONObject, locations: Sequence[Location], ctx: PolicyContext
    ) -> AsyncIterator[tuple[Policy[Any], list[int] | Exception]]:
        """Each request hook run again on `document`, and which of `locations` it changed (their
        indices), or what it raised."""
        before = await _snapshots(document, locations)
        for policy in self._request:
            try:
                await policy.on_request(document, ctx)
            except Exception as exc:  # attribution must never stop the fallback's record
                yield policy, exc
                before = await _snapshots(document, locations)
                continue
            after = await _snapshots(document, locations)
            yield (
                policy,
                [i for i, (old, new) in enumerate(zip(before, after, strict=True)) if old != new],
            )
            before = after


async def _snapshots(document: JSONObject, locations: Sequence[Location]) -> list[object]:
    """What is at each location, comparable after a hook ran: a string as itself (it cannot
    change in place), anything else as JSON text."""
    found: list[object] = []
    async for batch in in_turns(locations, batch=STEPS):
        values = resolve_each(document, batch)
        found.extend(value if type(value) is str else _json(value) for value in values)
    return found


def _json(value: Any) -> object:
    if value is MISSING:
        return value
    try:
        return (json.dumps(value, ensure_ascii=False),)
    except (TypeError, ValueError, RecursionError):
        return (repr(type(value)),)


@asynccontextmanager
async def _guard(policy: Policy[Any], hook: str) -> AsyncIterator[None]:
    try:
        yield
    except PolicyViolation as exc:
        if exc.policy is None:
            exc.policy = policy.label
        raise
    except Exception as exc:
        raise PolicyFailure(policy.label, hook) from exc
