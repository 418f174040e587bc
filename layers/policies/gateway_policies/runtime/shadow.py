"""Shadow-mode policies: run on the live call, on copies, and only recorded.

A chain entry with `"mode": "shadow"` runs after the enforced policies, on a
copy of what they produced: its request changes are never sent, its response
and stream changes never reach the client, a PolicyViolation it raises refuses
nothing (it is recorded as a `refuse` action), and it plays no part in the
passthrough fallback (the chain's attribution, `bypassable` and the
comparison of the sent request all see enforced policies only). What it does
is recorded through a context whose `shadow` is True, so every action it
records is marked shadow on the call's audit trail.

A shadow policy that raises or outlasts SHADOW_TIMEOUT_SECONDS is logged (and
on a stream, dropped for the rest of it); the call never notices. Cost: a hook no
shadow policy implements costs nothing; each shadow policy with the hook costs
one copy of what it reads (a request or a response, or each streamed event).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..actions import REFUSE
from ..base import JSONObject, Policy, PolicyContext, StreamEvent
from ..exceptions import PolicyViolation

SHADOW_TIMEOUT_SECONDS = 2.0
"""How long one shadow hook may take before it is abandoned (an await, such as a
judge's model call, is cut off; CPU work cannot be, so keep shadow policies light)."""

log = logging.getLogger("gateway_policies.shadow")


@dataclass
class _ShadowCall:
    """One call's shadow run: the context its records go through, and who has stopped."""

    ctx: PolicyContext
    stopped: set[int] = field(default_factory=set)
    """Shadow stream policies that refused or failed on this stream: an enforced one
    would have ended it there, so the rest of it is not theirs to judge."""


class ShadowPolicies:
    """A chain's shadow-mode policies, by hook."""

    def __init__(
        self, policies: Sequence[Policy[Any]] = (), timeout: float = SHADOW_TIMEOUT_SECONDS
    ) -> None:
        self.policies: tuple[Policy[Any], ...] = tuple(policies)
        self.timeout = timeout
        self._request = [p for p in self.policies if p.implements("on_request")]
        self._response = [p for p in self.policies if p.implements("on_response")]
        self._stream = [
            p
            for p in self.policies
            if p.implements("on_stream_event") or p.implements("on_stream_end")
        ]

    @property
    def names(self) -> list[str]:
        return [p.label for p in self.policies]

    @property
    def reads_request(self) -> bool:
        return bool(self._request)

    @property
    def reads_response(self) -> bool:
        return bool(self._response)

    @property
    def reads_stream(self) -> bool:
        return bool(self._stream)

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        run = self._call(ctx)
        for policy in self._request:
            await self._run(policy, "on_request", run, request)

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        run = self._call(ctx)
        for policy in self._response:
            await self._run(policy, "on_response", run, response)

    async def on_stream_events(self, events: Sequence[StreamEvent], ctx: PolicyContext) -> None:
        """Show each policy a copy of every event the client gets; what it returns is dropped."""
        if not events:
            return
        run = self._call(ctx)
        for policy in self._stream:
            for event in events:
                if id(policy) in run.stopped:
                    break
                if not await self._run(policy, "on_stream_event", run, event):
                    run.stopped.add(id(policy))

    async def on_stream_end(self, ctx: PolicyContext) -> None:
        run = self._call(ctx)
        for policy in self._stream:
            if id(policy) not in run.stopped:
                await self._run(policy, "on_stream_end", run)

    def _call(self, ctx: PolicyContext) -> _ShadowCall:
        # Kept among the call's policy states (keyed by this object, as a policy's are
        # by the policy), so a stream's shadow run is one run from its first event on.
        states = ctx._states
        found = states.get(id(self))
        if not isinstance(found, _ShadowCall):
            # The twin shares the call's audit trail and states: only `shadow` differs.
            found = states[id(self)] = _ShadowCall(replace(ctx, shadow=True))
        return found

    async def _run(
        self, policy: Policy[Any], hook: str, run: _ShadowCall, *read: JSONObject | StreamEvent
    ) -> bool:
        """`policy.<hook>` on copies of `read`: whatever it does, the call goes on unchanged.

        False when the policy refused or failed.
        """
        try:
            async with asyncio.timeout(self.timeout):
                await getattr(policy, hook)(*map(_copied, read), run.ctx)
        except PolicyViolation as exc:
            run.ctx.record(policy, REFUSE, hook=hook, status=exc.status, error_type=exc.error_type)
            return False
        except Exception as exc:
            error_type = "Timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
            log.warning(
                "shadow policy failed; the call goes on without it",
                extra={
                    "call_id": run.ctx.call_id,
                    "policy": policy.label,
                    "hook": hook,
                    "error_type": error_type,
                },
            )
            return False
        return True


def _copied(read: JSONObject | StreamEvent) -> JSONObject | StreamEvent:
    """A private copy; a document's through JSON text.

    Through JSON text, a request of many small values (8,000 text blocks, 0.9 MB)
    copies about 1.6 times faster than with deepcopy; long strings copy slower, since
    deepcopy shares them (`make bench` figure (10) reports both on its 1 MB request).
    """
    if isinstance(read, StreamEvent):
        return StreamEvent(read.event, read.data)
    document = read
    try:
        copied = json.loads(json.dumps(document, ensure_ascii=False))
    except (TypeError, ValueError):
        # A value JSON cannot carry (an enforced policy put it there): copy it as is.
        copied = copy.deepcopy(document)
    if not isinstance(copied, dict):
        raise TypeError("a shadow policy's copy is not a JSON object")
    return copied
