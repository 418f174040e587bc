"""Policies used by the tests, loaded by the gateway as `tests.policies:Name`."""

from __future__ import annotations

from gateway_policies import JSONObject, Policy, PolicyContext


class MutateNested(Policy):
    """Changes text deep inside the request, in place, as a careless policy might."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        block = request["messages"][0]["content"][0]
        block["text"] += " [mutated]"
        block.setdefault("cache_control", {"type": "ephemeral"})
        request["metadata"] = {"user_id": "mutated"}


class GuardedRewrite(Policy):
    """A request change that must never be bypassed."""

    bypassable = False

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["model"] = "claude-guarded"
