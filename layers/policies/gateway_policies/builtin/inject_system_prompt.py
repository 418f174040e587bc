"""Prepend operator text to the system prompt, whether it is a string or blocks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..base import JSONObject, Policy, PolicyContext


class InjectSystemPromptOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1)


class InjectSystemPrompt(Policy):
    name = "inject_system_prompt"
    Options = InjectSystemPromptOptions
    options: InjectSystemPromptOptions

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        text = self.options.text
        system = request.get("system")
        if isinstance(system, list):
            request["system"] = [{"type": "text", "text": text}, *system]
        elif isinstance(system, str) and system:
            request["system"] = f"{text}\n\n{system}"
        else:
            request["system"] = text
