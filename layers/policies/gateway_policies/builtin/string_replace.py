"""Replace literal strings in request and/or response text.

Reaches string content, text blocks, tool_result text and the system prompt;
never thinking or redacted_thinking blocks. In a stream, text deltas are
rewritten one delta at a time, so a match split across two deltas is not seen.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..base import JSONObject, Policy, PolicyContext, StreamEvent
from ..text import response_text_slots, rewrite_text, text_slots


class StringReplaceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    replacements: list[tuple[str, str]] = Field(min_length=1)
    apply_to: Literal["request", "response", "both"] = "request"


class StringReplace(Policy):
    name = "string_replace"
    Options = StringReplaceOptions
    options: StringReplaceOptions

    def _replace(self, text: str) -> str:
        for old, new in self.options.replacements:
            if old:
                text = text.replace(old, new)
        return text

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        if self.options.apply_to in ("request", "both"):
            rewrite_text(text_slots(request), self._replace)

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        if self.options.apply_to in ("response", "both"):
            rewrite_text(response_text_slots(response), self._replace)

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        if self.options.apply_to == "request" or event.event not in (
            "content_block_delta",
            "content_block_start",
        ):
            return [event]
        payload = event.json
        part = payload.get("delta") or payload.get("content_block") or {}
        if part.get("type") in ("text_delta", "text") and isinstance(part.get("text"), str):
            new = self._replace(part["text"])
            if new != part["text"]:
                part["text"] = new
                return [StreamEvent.from_json(event.event, payload)]
        return [event]
