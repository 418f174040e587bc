"""`JudgingGate`: a tool gate whose verdicts come from a `Judge`, and the notes it owes.

The tool gate (gateway_policies.tool_gate) owns how a blocked call looks, in
JSON and in a stream; this base adds what every judging policy shares: the
request's task context for the judge (`context: "task"`), and the notes an
answer carries after its blocks, for a block that passed unjudged (`on_error:
"allow"`) or, in a stream, for text judged after it was sent. A note is a
text block appended after the answer's last block (in a stream: before
`message_delta`, at the next free index), so no block the client holds moves.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..base import JSONObject, OptionsT, PolicyContext, StreamEvent
from ..tool_gate import ToolCallGate, text_block_events
from .core import Judge, Outcome
from .prompt import Judged


def unjudged_note(policy: str, what: str, outcome: Outcome) -> str:
    return f"[Policy Gateway: {policy} let {what} through unjudged: {outcome.reason()}]"


@dataclass
class NoteState:
    """One call's notes still owed, and the next index a new block may take in a stream."""

    notes: list[str] = field(default_factory=list)
    next_index: int = 0


class JudgingGate(ToolCallGate[OptionsT]):
    """A ToolCallGate whose subclass builds `self.judge` in `setup` and asks it per block."""

    judge: Judge

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        await super().on_request(request, ctx)
        self.judge.note_request(request, ctx)

    def owe_note(self, ctx: PolicyContext, note: str) -> None:
        ctx.state(self.judge.notes_key, NoteState).notes.append(note)

    async def judge_call(
        self, tool: str, tool_input: Any, ctx: PolicyContext, *, kind: str = "tool_use"
    ) -> Outcome:
        """The judge's outcome for one tool call; a call let through unjudged owes a note."""
        outcome = await self.judge.decide(Judged.tool_call(tool, tool_input, kind=kind), ctx)
        if outcome.unjudged:
            self.owe_note(ctx, unjudged_note(self.label, f"a call to tool {tool!r}", outcome))
        return outcome

    async def judge_texts(self, response: JSONObject, ctx: PolicyContext) -> None:
        """Judge the answer's text blocks, in place (rules_judge); none by default."""

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        # Text blocks and tool calls of one answer are judged at once: the judge bounds them.
        await asyncio.gather(super().on_response(response, ctx), self.judge_texts(response, ctx))
        notes = ctx.state(self.judge.notes_key, NoteState).notes
        content = response.get("content")
        if notes and isinstance(content, list):
            content.extend({"type": "text", "text": note} for note in notes)
            notes.clear()

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        state = ctx.state(self.judge.notes_key, NoteState)
        if event.type == "message_delta":
            owed = await self.before_message_delta(ctx)
            released = await super().on_stream_event(event, ctx)
            return [*owed, *self._notes(state), *released]
        if event.type == "content_block_start":
            index = (event.payload or {}).get("index")
            if type(index) is int:
                state.next_index = max(state.next_index, index + 1)
        return await super().on_stream_event(event, ctx)

    async def before_message_delta(self, ctx: PolicyContext) -> list[StreamEvent]:
        """Events a subclass still owes before the answer's end (rules_judge's held text)."""
        return []

    def _notes(self, state: NoteState) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for note in state.notes:
            events.extend(text_block_events(state.next_index, note, None))
            state.next_index += 1
        state.notes.clear()
        return events
