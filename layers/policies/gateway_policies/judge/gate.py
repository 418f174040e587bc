"""`JudgingGate`: a tool gate whose verdicts come from a `Judge`, and the notes it owes.

In a stream, judging is pipelined: a held block's judge starts when the block
ends and the gate reads on while it runs. What the client is owed stays in
order (a queue of events and pending judgings): each upstream event releases
every head of the queue already settled, and the answer's `message_delta`
waits for the rest. So the judges of one answer overlap each other (at most
`max_concurrent` at once) and the upstream's stream, and the answer ends about
one judge latency after the upstream's. A call the API ran itself
(`server_tool_use`, `mcp_tool_use`) is judged before the gate reads on: its
result block, next in the stream, is withheld by that verdict.

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
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..base import JSONObject, OptionsT, PolicyContext, StreamEvent
from ..blocked_call import text_block_events
from ..tool_gate import ToolCallGate
from .core import Judge, Outcome
from .prompt import Judged


def unjudged_note(policy: str, what: str, outcome: Outcome) -> str:
    return f"[Policy Gateway: {policy} let {what} through unjudged: {outcome.reason()}]"


Owed = list[StreamEvent] | asyncio.Task[list[StreamEvent]]
"""What a stream owes the client next: events, or the judging that will give them."""


@dataclass
class NoteState:
    """One call's notes still owed, the next index a new block may take in a stream, and
    the stream's pipeline: what is owed the client, in order."""

    notes: list[str] = field(default_factory=list)
    next_index: int = 0
    owed: deque[Owed] = field(default_factory=deque)


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

    def pipeline(self, ctx: PolicyContext) -> deque[Owed]:
        """This call's queue of what the client is owed, in order (a subclass appends the
        judging of a held block here and returns no events for it)."""
        return ctx.state(self.judge.notes_key, NoteState).owed

    async def _release(
        self, held: list[StreamEvent], stop: StreamEvent, partials: list[str], ctx: PolicyContext
    ) -> list[StreamEvent]:
        block = held[0].payload or {}
        if (block.get("content_block") or {}).get("type") != "tool_use":
            return await super()._release(held, stop, partials, ctx)
        release = super()._release(held, stop, partials, ctx)
        self.pipeline(ctx).append(asyncio.create_task(release))
        return []

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        state = ctx.state(self.judge.notes_key, NoteState)
        if event.type == "message_delta":
            settled = await _drain(state.owed, wait=True)
            owed = await self.before_message_delta(ctx)
            released = await super().on_stream_event(event, ctx)
            return [*settled, *owed, *self._notes(state), *released]
        return await self.owe(ctx, await super().on_stream_event(self.seen(event, ctx), ctx))

    def seen(self, event: StreamEvent, ctx: PolicyContext) -> StreamEvent:
        """`event`, its block's index noted: a note block takes the next free one."""
        if event.type == "content_block_start":
            state = ctx.state(self.judge.notes_key, NoteState)
            index = (event.payload or {}).get("index")
            if type(index) is int:
                state.next_index = max(state.next_index, index + 1)
        return event

    async def owe(self, ctx: PolicyContext, owed: Owed) -> list[StreamEvent]:
        """Queue `owed` behind what the client is owed already; the settled head, released."""
        queue = self.pipeline(ctx)
        queue.append(owed)
        return await _drain(queue, wait=False)

    async def on_stream_end(self, ctx: PolicyContext) -> list[StreamEvent]:
        state = ctx.state(self.judge.notes_key, NoteState)
        settled = await _drain(state.owed, wait=True)
        return [*settled, *await super().on_stream_end(ctx)]

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


async def _drain(owed: deque[Owed], *, wait: bool) -> list[StreamEvent]:
    """The events at the head of `owed` that are settled (all of them when `wait`), in order."""
    out: list[StreamEvent] = []
    while owed:
        head = owed[0]
        if isinstance(head, asyncio.Task):
            if not head.done() and not wait:
                break
            out.extend(await head)
        else:
            out.extend(head)
        owed.popleft()
    return out
