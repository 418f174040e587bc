"""Replacing blocked tool calls with text, in a response and in a stream.

Shared by every policy that decides, call by call, whether the model may use
a tool (block_tool_calls, tool_call_judge): a subclass only says *whether* a
call is blocked and why; this module owns *how* a block looks to the client.

A blocked tool_use block becomes a text block at the same index, so every
later block keeps its index and the client's accumulator sees contiguous
indices. In a stream, a tool_use block is held back from its
content_block_start until its content_block_stop: its input is only complete
(and judgeable) then, and a client that had already seen the start of a tool
call could act on it. Every other event passes through as it arrives.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from .base import JSONObject, OptionsT, Policy, PolicyContext, StreamEvent

_UNREADABLE = "its input is not valid JSON, so it could not be checked"


def canonical_input(value: Any) -> str:
    """The tool input as the text rules match against, the same in a response and a stream."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def blocked_text(policy: str, tool: str, reason: str) -> str:
    return f"[Policy Gateway: {policy} blocked a call to tool {tool!r}: {reason}]"


@dataclass
class GateState:
    """One call's stream state: the tool call held back, and what became of earlier ones."""

    held: list[StreamEvent] | None = None
    index: Any = None
    input: list[str] = field(default_factory=list)
    blocked: int = 0
    kept: int = 0


class ToolCallGate(Policy[OptionsT]):
    """Base of policies that block individual tool calls in model responses.

    Subclasses implement `blocked`, returning the reason for a block or None.
    """

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> str | None:
        raise NotImplementedError

    async def _verdict(self, tool: str, raw_input: str, ctx: PolicyContext) -> str | None:
        try:
            parsed = json.loads(raw_input) if raw_input.strip() else {}
        except ValueError:
            return _UNREADABLE
        return await self.blocked(tool, parsed, ctx)

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        content = response.get("content")
        if not isinstance(content, list):
            return
        calls = [
            (index, block)
            for index, block in enumerate(content)
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        if not calls:
            return
        reasons = await asyncio.gather(
            *(self.blocked(str(b.get("name")), b.get("input", {}), ctx) for _, b in calls)
        )
        for (index, block), reason in zip(calls, reasons, strict=True):
            if reason is not None:
                content[index] = {
                    "type": "text",
                    "text": blocked_text(self.label, str(block.get("name")), reason),
                }
        remains = any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
        if response.get("stop_reason") == "tool_use" and not remains:
            response["stop_reason"] = "end_turn"

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        state = ctx.state(self, GateState)
        held = state.held
        payload = event.payload
        if payload is None:
            # Not a JSON object: nothing a tool gate can read, and not part of
            # a tool_use block; it goes on as it came.
            return [event]
        # By the data's type, as the client dispatches, never by the event's name.
        kind = payload.get("type")
        block = payload.get("content_block")
        if (
            kind == "content_block_start"
            and isinstance(block, dict)
            and block.get("type") == "tool_use"
        ):
            owed = self._settle(held, state, "a new block began before it ended")
            state.held = [event]
            state.index = payload.get("index")
            state.input = []
            return owed
        if held is not None and payload.get("index") == state.index:
            if kind == "content_block_delta":
                held.append(event)
                delta = payload.get("delta")
                if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
                    state.input.append(str(delta.get("partial_json", "")))
                return []
            if kind == "content_block_stop":
                state.held = None
                return await self._release(held, event, "".join(state.input), ctx)
        if kind == "message_delta":
            owed = self._settle(held, state, "the message ended before its block did")
            return [*owed, self._fix_stop_reason(event, state)]
        return [event]

    def _settle(
        self, held: list[StreamEvent] | None, state: GateState, reason: str
    ) -> list[StreamEvent]:
        """Close a held tool call that can no longer complete: blocked, never released
        unchecked, and replaced by a text block so later indices stay contiguous."""
        if held is None:
            return []
        state.held = None
        state.blocked += 1
        start = held[0].payload or {}
        block = start.get("content_block") or {}
        text = blocked_text(self.label, str(block.get("name")), reason)
        return _text_block(start.get("index"), text, None)

    async def _release(
        self, held: list[StreamEvent], stop: StreamEvent, raw_input: str, ctx: PolicyContext
    ) -> list[StreamEvent]:
        state = ctx.state(self, GateState)
        block = held[0].json["content_block"]
        tool = str(block.get("name"))
        # A start that already carries its whole input has no deltas to read.
        source = raw_input if len(held) > 1 else json.dumps(block.get("input", {}))
        reason = await self._verdict(tool, source, ctx)
        if reason is None:
            state.kept += 1
            return [*held, stop]
        state.blocked += 1
        return _text_block(held[0].json.get("index"), blocked_text(self.label, tool, reason), stop)

    @staticmethod
    def _fix_stop_reason(event: StreamEvent, state: GateState) -> StreamEvent:
        delta = event.json.get("delta")
        if (
            isinstance(delta, dict)
            and delta.get("stop_reason") == "tool_use"
            and state.blocked
            and not state.kept
        ):
            delta["stop_reason"] = "end_turn"
        return event

    async def on_stream_end(self, ctx: PolicyContext) -> list[StreamEvent]:
        # A tool call whose block never ended was never checked: it is dropped,
        # never released unchecked.
        ctx.state(self, GateState).held = None
        return []


def _text_block(index: Any, text: str, stop: StreamEvent | None) -> list[StreamEvent]:
    """A complete text block at `index`: start, one delta, and `stop` (or a new one)."""
    return [
        StreamEvent.from_json(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        StreamEvent.from_json(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        stop
        or StreamEvent.from_json(
            "content_block_stop", {"type": "content_block_stop", "index": index}
        ),
    ]
