"""Send requests for one model to another (`{"map": {"from": "to"}}`).

A target may be an ordered list (`{"map": {"from": ["first", "second"]}}`):
the request goes to the first, and when the upstream answers 404 for it (a
retired or unknown model), the repair hook moves it to the next, once per
call (the retry ladder's repair rung). A repair only ever moves the model
this policy chose to the next one it lists, never back to the client's.

Bypassable: a mapped-to model that the upstream does not know is the typical
404 that the passthrough fallback repairs by resending the client's model.
"""

from __future__ import annotations

import itertools
from typing import Annotated

from pydantic import Field

from ..base import JSONObject, Policy, PolicyContext, UpstreamErrorInfo
from ..options import PolicyOptions

Targets = str | Annotated[list[str], Field(min_length=1)]


class RewriteModelOptions(PolicyOptions):
    map: dict[str, Targets] = Field(min_length=1)


class _Rewritten:
    """The model this policy set on this call, if it set one: the only one it may repair."""

    def __init__(self) -> None:
        self.model: str | None = None


def _listed(targets: Targets) -> list[str]:
    return [targets] if isinstance(targets, str) else targets


class RewriteModel(Policy[RewriteModelOptions]):
    name = "rewrite_model"

    def setup(self) -> None:
        # Each target that has a next one: where a 404 for it moves the request.
        self._next: dict[str, str] = {}
        for targets in self.options.map.values():
            listed = _listed(targets)
            for current, following in itertools.pairwise(listed):
                self._next.setdefault(current, following)

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        model = request.get("model")
        if isinstance(model, str) and model in self.options.map:
            target = request["model"] = _listed(self.options.map[model])[0]
            ctx.state(self, _Rewritten).model = target
            ctx.record(self, "rewrite", field="model", **{"from": model, "to": target})

    async def on_upstream_error(
        self, request: JSONObject, error: UpstreamErrorInfo, ctx: PolicyContext
    ) -> bool:
        model = request.get("model")
        if (
            error.status != 404
            or not isinstance(model, str)
            or model not in self._next
            or ctx.state(self, _Rewritten).model != model
        ):
            return False
        request["model"] = ctx.state(self, _Rewritten).model = self._next[model]
        return True
