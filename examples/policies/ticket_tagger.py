"""Tell the model which tickets a conversation is about, from ticket ids in the user's text."""

import re

from gateway_policies import JSONObject, Policy, PolicyContext, PolicyOptions, text_slots
from pydantic import Field


class TicketTaggerOptions(PolicyOptions):  # unknown keys in the chain JSON are refused
    projects: list[str] = Field(min_length=1)  # ticket key prefixes, e.g. ["OPS"]


class TicketTagger(Policy[TicketTaggerOptions]):
    name = "ticket_tagger"

    def setup(self) -> None:  # once per chain load, after the options are validated
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
