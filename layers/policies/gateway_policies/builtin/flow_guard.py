"""Untrusted content may not steer a tool call that acts on the outside world.

The conversation a request carries is the agent's whole history: what the
user asked, and what each tool returned. A sink call (`sinks`: rules with
block_tool_calls' shape and matching) in an answer is judged against it:

- `provenance` (the default): blocked when a value its input carries (a whole
  value, a URL or its host, an e-mail, IBAN, IP, `+` phone number, a
  secret-like token; provenance.candidates) of at least `min_length`
  characters, in normal form, occurs in an untrusted result and in no system
  or user-role text. A sink after an untrusted result the gateway cannot read
  (encrypted search content, an image, a PDF) is judged as `any_untrusted`.
- `any_untrusted`: blocked whenever an untrusted result came before it.

Untrusted results are those of the tools `untrusted` names (full match), of
the client's MCP tools (`mcp__…`), and of every call the API made itself
(server tools, MCP connectors), in the request or earlier in the answer
(provenance.conversation). The conversation is read as sent upstream, after
the chain's request policies, at the first sink call of an answer; a batch
result arrives without it, so there every sink call is blocked.

A blocked call is handled as block_tool_calls handles one (tool_gate); the
record says the check, the kind of the value, the blocked call's id
(`blocked_tool_use_id`) and the id of the untrusted result the value came
from (`untrusted_tool_use_id`, the result block's `tool_use_id`), never the
value. Server tools a sink rule names are
refused before anything is sent, as block_tool_calls does.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from .. import recorder
from ..base import JSONObject, PolicyContext, StreamEvent
from ..detect import detector
from ..provenance.candidates import candidates
from ..provenance.conversation import (
    Conversation,
    is_upstream_result,
    read_request,
    read_result,
)
from ..provenance.normalise import SearchableMemo
from ..tool_gate import Block, GateState, ToolCallGate, Verdict
from ..tool_options import McpServerOptions
from ..tool_rules import ToolRule, ToolRules
from ..upstream_tools import ServerTool

Check = Literal["provenance", "any_untrusted"]
PROVENANCE: Check = "provenance"
ANY_UNTRUSTED: Check = "any_untrusted"


class FlowGuardOptions(McpServerOptions):
    untrusted: list[str] = Field(default_factory=list)
    sinks: list[ToolRule] = Field(min_length=1)
    check: Check = PROVENANCE
    min_length: int = Field(default=8, ge=1)

    @field_validator("untrusted")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return patterns


@dataclass
class FlowState(GateState):
    """One call's view of its conversation: the request as sent, read at the first sink
    (and, as any tool gate's, the stream's held calls)."""

    request: JSONObject | None = None
    conversation: Conversation | None = None
    seen: list[JSONObject] = field(default_factory=list)
    """Untrusted results met in the answer before the conversation was read."""


class FlowGuard(ToolCallGate[FlowGuardOptions]):
    name = "flow_guard"

    def setup(self) -> None:
        self._sinks = ToolRules(self.options.sinks)
        self._untrusted = (
            re.compile("|".join(f"(?:{p})" for p in self.options.untrusted))
            if self.options.untrusted
            else None
        )
        self._searchable = SearchableMemo()
        # Compiled now (at init, before a snapshot), not at the first sink call.
        detector()

    def _is_untrusted(self, tool: str) -> bool:
        return self._untrusted is not None and self._untrusted.fullmatch(tool) is not None

    def refuses_server_tool(self, tool: ServerTool) -> str | None:
        return self._sinks.naming_server_tool(tool)

    def allowed_mcp_servers(self) -> Collection[str]:
        return self.options.allowed_mcp_servers

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        await super().on_request(request, ctx)
        # Kept, not read: the policies after this one change it in place, and
        # only a sink call needs it read.
        ctx.state(self, FlowState).request = request

    def _saw(self, block: Any, state: FlowState) -> None:
        """An answer block before the calls still to be judged."""
        if not is_upstream_result(block):
            return
        if state.conversation is None:
            state.seen.append(block)
        else:
            state.conversation.add(read_result(block, self._searchable))

    def _conversation(self, state: FlowState) -> Conversation | None:
        if state.conversation is None and state.request is not None:
            state.conversation = read_request(state.request, self._is_untrusted, self._searchable)
            for block in state.seen:
                state.conversation.add(read_result(block, self._searchable))
        return state.conversation

    async def verdicts(
        self, content: list[Any], calls: Sequence[tuple[int, JSONObject]], ctx: PolicyContext
    ) -> Sequence[Verdict]:
        # In order: a call is judged with the results the answer holds before it.
        state = ctx.state(self, FlowState)
        verdicts: list[Verdict] = []
        done = 0
        for index, block in calls:
            for earlier in content[done:index]:
                self._saw(earlier, state)
            done = index + 1
            verdicts.append(await self.blocked(str(block.get("name")), block.get("input"), ctx))
        return verdicts

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        # Made here first: the gate's own stream state is this one.
        state = ctx.state(self, FlowState)
        if event.type == "content_block_start":
            self._saw((event.payload or {}).get("content_block"), state)
        return await super().on_stream_event(event, ctx)

    def call_details(self, block: JSONObject) -> dict[str, Any]:
        return {"blocked_tool_use_id": recorder.text(str(block.get("id")))}

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> Verdict:
        sink = self._sinks.matching(tool, tool_input)
        if sink is None:
            return None
        record: dict[str, Any] = {"tool": recorder.text(tool), "check": self.options.check}
        conversation = self._conversation(ctx.state(self, FlowState))
        if conversation is None:
            reason = "the conversation it continues is not known here"
            return Block(f"it is a sink ({sink}) and {reason}", {**record, "conversation": False})
        latest = conversation.latest
        if latest is None:
            return None
        if self.options.check == ANY_UNTRUSTED:
            return Block(
                f"it is a sink ({sink}) and the conversation holds an untrusted result "
                f"({recorder.text(latest.id)})",
                {**record, "untrusted_tool_use_id": recorder.text(latest.id)},
            )
        unreadable = conversation.unreadable
        if unreadable is not None:
            return Block(
                f"it is a sink ({sink}) after an untrusted result the gateway cannot read "
                f"({recorder.text(unreadable.id)}), so it is judged as any_untrusted",
                {
                    **record,
                    "judged_as": ANY_UNTRUSTED,
                    "unreadable": True,
                    "untrusted_tool_use_id": recorder.text(unreadable.id),
                },
            )
        found = candidates(tool_input, self.options.min_length)
        tainted = conversation.tainted(found)
        if tainted is None:
            return None
        kind, source = found[tainted[0]].kind, recorder.text(tainted[1])
        return Block(
            f"it is a sink ({sink}) and its input carries a {kind} that "
            f"came from an untrusted result ({source}), not from the user",
            {**record, "kind": kind, "untrusted_tool_use_id": source},
        )
