"""Policies with bugs, loaded as `tests.support.faulty_policies:Name`: the gateway fails closed."""

from __future__ import annotations

from gateway_policies import JSONObject, Policy, PolicyContext, StreamEvent

INTERNALS = "internal-detail-7f3a"


class ExplodeOnRequest(Policy):
    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        raise RuntimeError(f"{INTERNALS}: {request['messages']}")


class ExplodeOnResponse(Policy):
    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        raise KeyError(INTERNALS)


class ExplodeMidStream(Policy):
    """Passes the first events, then fails on the first text delta."""

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        if event.event == "content_block_delta":
            raise ValueError(INTERNALS)
        return [event]
