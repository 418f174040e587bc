"""Tell the model which tickets a conversation is about, from ticket ids in the user's text."""

import re
from collections.abc import Mapping
from typing import Any

from gateway_policies import JSONObject, Policy, PolicyContext
from gateway_policies.text import text_slots
from pydantic import BaseModel, ConfigDict, Field


class TicketTaggerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a typo in the chain JSON is an error

    projects: list[str] = Field(min_length=1)  # ticket key prefixes, e.g. ["OPS"]


class TicketTagger(Policy):
    name = "ticket_tagger"
    Options = TicketTaggerOptions
    options: TicketTaggerOptions

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)  # validates options, raises PolicyConfigError
        keys = "|".join(map(re.escape, self.options.projects))
        self._ticket = re.compile(rf"\b(?:{keys})-\d+\b")

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        slots = text_slots(request, system=False)
        found = sorted({t for box, key in slots for t in self._ticket.findall(box[key])})
        if not found:
            return
        note = f"This conversation concerns ticket(s) {', '.join(found)}."
        system = request.get("system")
        if isinstance(system, list):
            request["system"] = [*system, {"type": "text", "text": note}]
        else:
            request["system"] = f"{system}\n\n{note}" if system else note
