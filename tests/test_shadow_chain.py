"""Shadow-mode policies in the chain itself: copies, the audit trail, the bound, the cost."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from gateway_policies import (
    JSONObject,
    Policy,
    PolicyChain,
    PolicyContext,
    PolicyViolation,
    StreamEvent,
)
from gateway_policies.runtime import shadow as shadow_module

from .support import policies
from .support.fake_upstream import MODEL

pytestmark = pytest.mark.unit


class Mutates(Policy):
    """Changes everything it is shown, and records that it did."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["model"] = "shadowed"
        ctx.record(self, "rewrite", paths=["$.model"])

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        response["content"] = []

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        event.json["type"] = "shadowed"
        return []


class Hangs(Policy):
    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        await asyncio.Event().wait()


class RefusesEvents(Policy):
    """Refuses every event; counts the events it is shown."""

    def setup(self) -> None:
        self.seen = 0

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        self.seen += 1
        raise PolicyViolation("no")


def context() -> PolicyContext:
    return PolicyContext("messages", stream=True, call_id="c1", caller="alice")


def ping() -> StreamEvent:
    return StreamEvent("ping", '{"type":"ping"}')


def test_shadow_changes_stay_on_copies_and_records_come_out_shadow() -> None:
    chain = PolicyChain(shadow=[Mutates()])
    ctx = context()
    request: JSONObject = {"model": MODEL, "messages": []}
    response: JSONObject = {"content": [{"type": "text", "text": "hi"}]}

    async def run() -> list[StreamEvent]:
        await chain.apply_request(request, ctx)
        await chain.apply_response(response, ctx)
        return await chain.apply_stream_event(ping(), ctx)

    assert asyncio.run(run()) == [ping()]
    assert request == {"model": MODEL, "messages": []}
    assert response == {"content": [{"type": "text", "text": "hi"}]}
    assert [a.as_json() for a in ctx.actions] == [
        {"policy": "Mutates", "action": "rewrite", "paths": ["$.model"], "shadow": True}
    ]
    # The fallback's view of the chain: nothing to bypass, nothing sent differently.
    assert not chain.has_request_hooks
    assert chain.non_bypassable == []
    assert chain.reads_request
    assert not chain.has_response_hooks
    assert not chain.filters_stream


def test_a_hanging_shadow_policy_is_cut_off_at_its_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chain = PolicyChain(shadow=[Hangs()], shadow_timeout=0.01)
    request: JSONObject = {"model": MODEL}
    asyncio.run(chain.apply_request(request, context()))
    assert request == {"model": MODEL}
    (failure,) = [r for r in caplog.records if r.getMessage().startswith("shadow policy failed")]
    assert failure.error_type == "Timeout"  # type: ignore[attr-defined]
    assert failure.policy == "Hangs"  # type: ignore[attr-defined]


def test_a_shadow_stream_policy_that_refused_sees_no_more_of_the_stream() -> None:
    refuses = RefusesEvents()
    chain = PolicyChain(shadow=[refuses])
    ctx = context()

    async def run() -> None:
        for _ in range(3):
            assert await chain.apply_stream_event(ping(), ctx) == [ping()]
        await chain.apply_stream_end(ctx)

    asyncio.run(run())
    assert refuses.seen == 1
    assert [a.as_json() for a in ctx.actions] == [
        {
            "policy": "RefusesEvents",
            "action": "refuse",
            "hook": "on_stream_event",
            "status": 403,
            "error_type": "permission_error",
            "shadow": True,
        }
    ]


def test_copies_are_made_only_for_a_shadow_policy_with_that_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copies: list[Any] = []
    real = shadow_module._copied

    def counted(read: Any) -> Any:
        copies.append(read)
        return real(read)

    monkeypatch.setattr(shadow_module, "_copied", counted)
    ctx = context()

    async def run(chain: PolicyChain) -> None:
        await chain.apply_request({"model": MODEL}, ctx)
        await chain.apply_response({"content": []}, ctx)

    asyncio.run(run(PolicyChain([Mutates()], shadow=[policies.ShoutInPlace()])))
    assert copies == []
    asyncio.run(PolicyChain(shadow=[policies.ShoutInPlace()]).apply_stream_event(ping(), ctx))
    assert copies == [ping()]
