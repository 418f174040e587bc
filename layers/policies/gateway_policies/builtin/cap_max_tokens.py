"""Lower `max_tokens` to an operator ceiling (`{"max": N}`).

Extended thinking requires `budget_tokens < max_tokens`, so a capped request
with a larger thinking budget has its budget lowered too, as long as the
result stays at or above the API's minimum budget; below that the request is
left for the upstream to judge. Requests without `max_tokens` (count_tokens)
are untouched. Bypassable: a cap is a cost control, and a request the cap
made invalid is better served uncapped than refused, when the operator has
turned the fallback on.

Every JSON form of a number is read (`64000`, `64000.0`, `"64000"`): a lax
upstream may accept each. A `max_tokens` that is no number at all, or is
infinite, cannot be checked against the cap and is refused.
"""

from __future__ import annotations

from pydantic import Field

from ..base import JSONObject, Policy, PolicyContext
from ..exceptions import PolicyViolation
from ..numbers import json_number
from ..options import PolicyOptions

MIN_THINKING_BUDGET = 1024


class CapMaxTokensOptions(PolicyOptions):
    max: int = Field(ge=1)


class CapMaxTokens(Policy[CapMaxTokensOptions]):
    name = "cap_max_tokens"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        if "max_tokens" not in request:
            return
        ceiling = self.options.max
        current = json_number(request["max_tokens"])
        if current is None:
            raise PolicyViolation(
                "max_tokens: must be a number.", status=400, error_type="invalid_request_error"
            )
        if current <= ceiling:
            return
        request["max_tokens"] = ceiling
        ctx.record(self, "cap", field="max_tokens", limit=ceiling)
        thinking = request.get("thinking")
        if not isinstance(thinking, dict):
            return
        budget = json_number(thinking.get("budget_tokens"))
        if budget is not None and budget >= ceiling and ceiling - 1 >= MIN_THINKING_BUDGET:
            thinking["budget_tokens"] = ceiling - 1
            ctx.record(self, "cap", field="thinking.budget_tokens", limit=ceiling - 1)
