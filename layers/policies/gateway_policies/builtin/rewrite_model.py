"""Send requests for one model to another (`{"map": {"from": "to"}}`).

Bypassable: a mapped-to model that the upstream does not know is the typical
404 that the passthrough fallback repairs by resending the client's model.
"""

from __future__ import annotations

from pydantic import Field

from ..base import JSONObject, Policy, PolicyContext
from ..options import PolicyOptions


class RewriteModelOptions(PolicyOptions):
    map: dict[str, str] = Field(min_length=1)


class RewriteModel(Policy[RewriteModelOptions]):
    name = "rewrite_model"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        model = request.get("model")
        if isinstance(model, str) and model in self.options.map:
            request["model"] = self.options.map[model]
            ctx.record(self, "rewrite", field="model", **{"from": model, "to": request["model"]})
