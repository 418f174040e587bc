"""Replacing blocked tool calls with text, in a response and in a stream.

Shared by every policy that decides, call by call, whether the model may use
a tool (block_tool_calls, tool_call_judge): a subclass only says *whether* a
call is blocked and why; this module owns *when* a call is replaced, held and
withheld, and blocked_call.py *what* the replacement says.

A call can also be one the API made itself (`server_tool_use`, `mcp_tool_use`):
it ran upstream before the gateway saw it. Such a call is judged like a
`tool_use`, logged as executed upstream, and when blocked it is replaced like
one and its result block (the block whose `tool_use_id` is its id) is
withheld. Since judging an answer is too late for those, the request is
checked first: a server tool the policy would block (`refuses_server_tool`)
and an MCP server it does not allow (`allowed_mcp_servers`) refuse the request
before anything is sent (gateway_policies.upstream_tools).

A blocked tool_use block becomes a text block at the same index, so every
later block keeps its index and the client's accumulator sees contiguous
indices. In a stream, a tool_use block is held back from its
content_block_start until its content_block_stop: its input is only complete
(and judgeable) then, and a client that had already seen the start of a tool
call could act on it. Every other event passes through as it arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import JSONObject, OptionsT, Policy, PolicyContext, StreamEvent
from .blocked_call import (
    UNREADABLE,
    Block,
    Verdict,
    as_block,
    blocked_text,
    text_block_events,
    withheld_text,
)
from .tool_input import assembled_inputs
from .upstream_tools import (
    CALL_TYPES,
    UPSTREAM_CALL_TYPES,
    ServerTool,
    refuse_server_tool,
    refuse_unlisted_mcp_servers,
    server_tools,
)

log = logging.getLogger("gateway_policies.tool_gate")


def _is_upstream(block: JSONObject) -> bool:
    return block.get("type") in UPSTREAM_CALL_TYPES


def _withheld_call(block: Any, withheld: dict[str, str]) -> str | None:
    """The tool whose blocked call `block` is the result of, if it is one."""
    call = block.get("tool_use_id") if isinstance(block, dict) else None
    return withheld.get(call) if isinstance(call, str) else None


@dataclass
class GateState:
    """One call's stream state: the tool call held back, and what became of earlier ones."""

    held: list[StreamEvent] | None = None
    index: Any = None
    input: list[str] = field(default_factory=list)
    """The held call's `input_json_delta` partials, empty ones included."""
    blocked: int = 0
    kept: int = 0
    withheld: dict[str, str] = field(default_factory=dict)
    """Ids of blocked calls that ran upstream, and their tool names: their results are withheld."""
    withholding: Any = None
    """The index of the result block being withheld, while it streams."""


class ToolCallGate(Policy[OptionsT]):
    """Base of policies that block individual tool calls in model responses.

    Subclasses implement `blocked`, returning the reason for a block (a string, or a
    `Block` with details for the audit trail) or None.
    A server tool in a request is refused unless `refuses_server_tool` says
    otherwise, and an MCP server unless `allowed_mcp_servers` lists it: by
    default every one, since no call of theirs can be judged before it runs.
    Each blocked call is recorded here (`block`, with the tool's name), so a
    subclass records nothing itself.
    """

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> Verdict:
        raise NotImplementedError

    async def verdicts(
        self, content: list[Any], calls: Sequence[tuple[int, JSONObject]], ctx: PolicyContext
    ) -> Sequence[Verdict]:
        """The verdict on each call of a whole answer (`calls`: index in `content`, block).

        By default each call is judged alone, all at once; a policy whose verdict
        depends on the blocks before a call (flow_guard) judges them in order.
        """
        return await asyncio.gather(
            *(self.blocked(str(b.get("name")), b.get("input", {}), ctx) for _, b in calls)
        )

    def refuses_server_tool(self, tool: ServerTool) -> str | None:
        """Why a request may not offer this server tool, or None to let it run (its calls
        are then judged in the answer, after they ran)."""
        return "this policy cannot judge its calls before they run"

    def allowed_mcp_servers(self) -> Collection[str]:
        """Names or URLs of the MCP servers a request may name."""
        return ()

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        refuse_unlisted_mcp_servers(request, self.allowed_mcp_servers(), self.label)
        for tool in server_tools(request):
            reason = self.refuses_server_tool(tool)
            if reason is not None:
                raise refuse_server_tool(tool, self.label, reason)

    async def _verdict(
        self, tool: str, block: JSONObject, partials: list[str], ctx: PolicyContext
    ) -> Block | None:
        """Why a streamed call is blocked: the first block for any input a client may assemble."""
        try:
            inputs = assembled_inputs(block, partials)
        except ValueError:
            return Block(UNREADABLE)
        for tool_input in inputs:
            found = as_block(await self.blocked(tool, tool_input, ctx))
            if found is not None:
                return found
        return None

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        content = response.get("content")
        if not isinstance(content, list):
            return
        calls = [
            (index, block)
            for index, block in enumerate(content)
            if isinstance(block, dict) and block.get("type") in CALL_TYPES
        ]
        if not calls:
            return
        verdicts = await self.verdicts(content, calls, ctx)
        withheld: dict[str, str] = {}
        for (index, block), verdict in zip(calls, verdicts, strict=True):
            tool, upstream = str(block.get("name")), _is_upstream(block)
            found = as_block(verdict)
            if upstream:
                self._log_upstream_call(block, found, ctx)
            if found is not None:
                self._record_block(ctx, block, found.details)
                text = blocked_text(self.label, tool, found.reason, upstream=upstream)
                content[index] = {"type": "text", "text": text}
                if upstream:
                    withheld[str(block.get("id"))] = tool
        for index, block in enumerate(content):
            if (of := _withheld_call(block, withheld)) is not None:
                content[index] = {"type": "text", "text": withheld_text(self.label, of)}
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
        kind = event.type
        block = payload.get("content_block")
        if (
            kind == "content_block_start"
            and isinstance(block, dict)
            and block.get("type") in CALL_TYPES
        ):
            owed = self._settle(held, state, ctx, "a new block began before it ended")
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
                return await self._release(held, event, state.input, ctx)
        if kind == "message_delta":
            owed = self._settle(held, state, ctx, "the message ended before its block did")
            return [*owed, self._fix_stop_reason(event, state)]
        return self._withhold_results(event, kind, payload, state)

    def _withhold_results(
        self, event: StreamEvent, kind: str | None, payload: JSONObject, state: GateState
    ) -> list[StreamEvent]:
        """The result block of a blocked upstream call becomes a text block saying so."""
        index = payload.get("index")
        of = _withheld_call(payload.get("content_block"), state.withheld)
        if kind == "content_block_start" and of is not None:
            state.withholding = index
            return text_block_events(index, withheld_text(self.label, of), None)[:2]
        if state.withholding is not None and index == state.withholding:
            if kind == "content_block_delta":
                return []
            if kind == "content_block_stop":
                state.withholding = None
        return [event]

    def _settle(
        self, held: list[StreamEvent] | None, state: GateState, ctx: PolicyContext, reason: str
    ) -> list[StreamEvent]:
        """Close a held tool call that can no longer complete: blocked, never released
        unchecked, and replaced by a text block so later indices stay contiguous."""
        if held is None:
            return []
        state.held = None
        start = held[0].payload or {}
        block = start.get("content_block") or {}
        return self._replace_blocked(block, start.get("index"), None, Block(reason), state, ctx)

    async def _release(
        self, held: list[StreamEvent], stop: StreamEvent, partials: list[str], ctx: PolicyContext
    ) -> list[StreamEvent]:
        state = ctx.state(self, GateState)
        block = held[0].json["content_block"]
        tool = str(block.get("name"))
        found = await self._verdict(tool, block, partials, ctx)
        upstream = _is_upstream(block)
        if upstream:
            self._log_upstream_call(block, found, ctx)
        if found is None:
            # Only client calls decide the stop reason: a server call never ends the turn.
            if not upstream:
                state.kept += 1
            return [*held, stop]
        return self._replace_blocked(block, held[0].json.get("index"), stop, found, state, ctx)

    def _replace_blocked(
        self,
        block: JSONObject,
        index: Any,
        stop: StreamEvent | None,
        found: Block,
        state: GateState,
        ctx: PolicyContext,
    ) -> list[StreamEvent]:
        """A blocked streamed call as the text block that takes its place at `index`; a
        server call's id is remembered so that its result block is withheld too."""
        tool, upstream = str(block.get("name")), _is_upstream(block)
        if upstream:
            state.withheld[str(block.get("id"))] = tool
        else:
            state.blocked += 1
        self._record_block(ctx, block, found.details)
        text = blocked_text(self.label, tool, found.reason, upstream=upstream)
        return text_block_events(index, text, stop)

    def call_details(self, block: JSONObject) -> dict[str, Any]:
        """What a blocked call's record says of the call itself besides its tool's name
        (nothing by default; flow_guard names the call's id beside its source's)."""
        return {}

    def _record_block(
        self, ctx: PolicyContext, block: JSONObject, details: Mapping[str, Any]
    ) -> None:
        """The audit trail's entry for one blocked call: the tool's name (or what the
        verdict's details say it is), never its input."""
        entry = {"tool": str(block.get("name")), **self.call_details(block), **details}
        if _is_upstream(block):
            entry["upstream"] = True
        ctx.record(self, "block", **entry)

    def _log_upstream_call(
        self, block: JSONObject, found: Block | None, ctx: PolicyContext
    ) -> None:
        """Every call the API made itself is on record: it ran, whatever the verdict."""
        log.log(
            logging.INFO if found is None else logging.WARNING,
            "tool call executed upstream",
            extra={
                "call_id": ctx.call_id,
                "policy": self.label,
                "block_type": block.get("type"),
                "tool": str(block.get("name")),
                "mcp_server": block.get("server_name"),
                "blocked": found is not None,
            },
        )

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
        state = ctx.state(self, GateState)
        if state.held is not None:
            block = (state.held[0].payload or {}).get("content_block") or {}
            self._record_block(ctx, block, {})
        state.held = None
        return []
