"""Prepend operator text to the system prompt, whether it is a string or blocks."""

from __future__ import annotations

from pydantic import Field

from ..base import JSONObject, Policy, PolicyContext
from ..options import PolicyOptions


class InjectSystemPromptOptions(PolicyOptions):
    text: str = Field(min_length=1)


class InjectSystemPrompt(Policy[InjectSystemPromptOptions]):
    name = "inject_system_prompt"

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        text = self.options.text
        system = request.get("system")
        if isinstance(system, list):
            request["system"] = [{"type": "text", "text": text}, *system]
        elif isinstance(system, str) and system:
            request["system"] = f"{text}\n\n{system}"
        else:
            request["system"] = text
        ctx.record(self, "inject", field="system")
