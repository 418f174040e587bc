"""Rules in plain English: a judge model reads each block of an answer against them.

`rules` (or a `preset`, judge/presets.py) go to the judge as its rules; each
tool call (and, with `judge: ["tool_use", "text"]`, each text block) goes to
it as data (gateway_policies.judge), pre-filtered by `when` so only blocks a
rule could concern cost a judge call. A tool call is allowed or blocked,
exactly as block_tool_calls blocks (tool_gate, JSON and stream, shadow mode
included). A text block is allowed, blocked (replaced by a short note naming
the rule) or replaced by the judge's text.

In a stream a tool call is held until judged, as every tool gate holds it.
Text follows `text_mode`: `hold` (each text block is held until its verdict;
its judge starts when the block ends, while the upstream streams on) or
`stream` (text passes as it arrives; a block judged afterwards to break a
rule is followed, at the end of the answer, by a note block, and the record
says `after_sent: true`). Judging is pipelined (judge.gate): the judges of
one answer run at once, bounded by `max_concurrent`, and the client gets the
blocks in their order.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, model_validator

from ..actions import BLOCK, REWRITE
from ..base import JSONObject, PolicyContext, StreamEvent
from ..blocked_call import Block, text_block_events
from ..judge.core import Judge, Outcome
from ..judge.gate import JudgingGate, Owed, unjudged_note
from ..judge.options import JudgeOptions
from ..judge.presets import PRESET_NAMES, preset
from ..judge.prompt import TEXT, TOOL_USE, Judged
from ..judge.verdict import ALLOW, REPLACE
from ..options import PolicyOptions
from ..tool_options import McpServerOptions
from ..tool_rules import ToolRule, ToolRules


class WhenOptions(PolicyOptions):
    tool_calls: list[ToolRule] | None = None
    """Only calls one of these rules matches are judged (block_tool_calls' rules)."""
    text: str | None = None
    """Only text blocks this regex finds something in are judged."""

    @model_validator(mode="after")
    def _compiles(self) -> WhenOptions:
        if self.text is not None:
            try:
                re.compile(self.text)
            except re.error as exc:
                raise ValueError(f"when.text is not a valid regular expression: {exc}") from exc
        return self


class RulesJudgeOptions(McpServerOptions, JudgeOptions):
    rules: str | None = Field(default=None, min_length=1)
    preset: Literal[PRESET_NAMES] | None = None  # type: ignore[valid-type]
    use: str | None = Field(default=None, min_length=1)
    """package_manager's tool: the one the project uses (`uv`, `npm`, …)."""
    judge: list[Literal["tool_use", "text"]] = Field(default=["tool_use"])
    when: WhenOptions | None = None
    text_mode: Literal["hold", "stream"] = "hold"

    @model_validator(mode="after")
    def _has_rules(self) -> RulesJudgeOptions:
        if self.rules is None and self.preset is None:
            raise ValueError("rules_judge needs `rules`, a `preset`, or both")
        if self.use is not None and self.preset != "package_manager":
            raise ValueError("`use` goes with the package_manager preset only")
        if self.preset is not None:
            preset(self.preset, self.use)
        if not self.judge:
            raise ValueError("`judge` names at least one of tool_use, text")
        return self


def _text_note(policy: str, outcome: Outcome) -> str:
    return f"[Policy Gateway: {policy} withheld this text: {outcome.reason()}]"


def _after_note(policy: str, index: int, outcome: Outcome) -> str:
    return (
        f"[Policy Gateway: {policy} judged text block {index} above, already sent, to break "
        f"a rule: {outcome.reason()}]"
    )


@dataclass
class TextState:
    """One call's text blocks in a stream: the one being held or read, and judges pending."""

    index: Any = None
    held: list[StreamEvent] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    pending: list[tuple[int, asyncio.Task[Outcome]]] = field(default_factory=list)


class RulesJudge(JudgingGate[RulesJudgeOptions]):
    name = "rules_judge"

    def setup(self) -> None:
        options = self.options
        found = None if options.preset is None else preset(options.preset, options.use)
        rules = "\n\n".join(text for text in (found and found.rules, options.rules) if text)
        self.judge = Judge(self, options, rules)
        when = options.when
        tool_rules = when.tool_calls if when is not None and when.tool_calls else None
        if tool_rules is None and found is not None:
            tool_rules = list(found.when)
        self._tool_filter = None if tool_rules is None else ToolRules(tool_rules)
        self._text_filter = None if when is None or when.text is None else re.compile(when.text)
        self._tools = TOOL_USE in options.judge
        self._texts = TEXT in options.judge
        # The tool gate keeps its call state under the policy itself; text has its own.
        self._text_key = object()

    def allowed_mcp_servers(self) -> Collection[str]:
        return self.options.allowed_mcp_servers

    # ------------------------------------------------------------ tool calls

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> Block | None:
        if not self._tools:
            return None
        if self._tool_filter is not None and self._tool_filter.matching(tool, tool_input) is None:
            return None
        outcome = await self.judge_call(tool, tool_input, ctx)
        if outcome.decision == ALLOW:
            return None
        details = {"rule": outcome.verdict.rule} if outcome.verdict and outcome.verdict.rule else {}
        return Block(outcome.reason(), details)

    # ------------------------------------------------------------ text

    def _judges_text(self, text: str) -> bool:
        return self._texts and (self._text_filter is None or bool(self._text_filter.search(text)))

    async def _judge_text(self, text: str, ctx: PolicyContext) -> Outcome:
        return await self.judge.decide(Judged.text(text), ctx)

    def _settled_text(
        self, index: int, outcome: Outcome, ctx: PolicyContext, *, after_sent: bool = False
    ) -> str | None:
        """What takes a judged text block's place (None: it stays), recorded; a block passed
        unjudged owes a note."""
        if outcome.unjudged:
            self.owe_note(ctx, unjudged_note(self.label, f"text block {index}", outcome))
            return None
        if outcome.decision == ALLOW:
            return None
        rule = outcome.verdict.rule if outcome.verdict is not None else None
        entry: dict[str, Any] = {"kind": TEXT, "index": index}
        if rule:
            entry["rule"] = rule
        if after_sent:
            entry["after_sent"] = True
        replacement = outcome.verdict.replacement if outcome.verdict is not None else None
        replaced = outcome.decision == REPLACE and replacement is not None
        ctx.record(self, REWRITE if replaced else BLOCK, **entry)
        if after_sent:
            self.owe_note(ctx, _after_note(self.label, index, outcome))
            return None
        return replacement if replaced else _text_note(self.label, outcome)

    async def judge_texts(self, response: JSONObject, ctx: PolicyContext) -> None:
        content = response.get("content")
        if not isinstance(content, list):
            return
        texts = [
            (index, block["text"])
            for index, block in enumerate(content)
            if isinstance(block, dict)
            and block.get("type") == TEXT
            and isinstance(block.get("text"), str)
            and self._judges_text(block["text"])
        ]
        outcomes = await asyncio.gather(*(self._judge_text(text, ctx) for _, text in texts))
        for (index, _), outcome in zip(texts, outcomes, strict=True):
            replacement = self._settled_text(index, outcome, ctx)
            if replacement is not None:
                content[index] = {"type": TEXT, "text": replacement}

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        if not self._texts:
            return await super().on_stream_event(event, ctx)
        state = ctx.state(self._text_key, TextState)
        payload = event.payload
        kind = event.type
        if payload is not None and kind == "content_block_start":
            block = payload.get("content_block")
            if isinstance(block, dict) and block.get("type") == TEXT:
                state.index, state.text = payload.get("index"), [str(block.get("text", ""))]
                if self.options.text_mode == "hold":
                    state.held = [self.seen(event, ctx)]
                    return await self.owe(ctx, [])
        elif (
            payload is not None and state.index is not None and payload.get("index") == state.index
        ):
            if kind == "content_block_delta":
                delta = payload.get("delta")
                if isinstance(delta, dict) and delta.get("type") == "text_delta":
                    state.text.append(str(delta.get("text", "")))
                if state.held:
                    state.held.append(event)
                    # Held, but every event releases what the client is owed already.
                    return await self.owe(ctx, [])
            elif kind == "content_block_stop":
                return await self.owe(ctx, self._text_ended(event, state, ctx))
        return await super().on_stream_event(event, ctx)

    def _text_ended(self, stop: StreamEvent, state: TextState, ctx: PolicyContext) -> Owed:
        """What a text block's end owes the client: its events now (not judged, or already
        sent and judged on the side), or the judging of a held block."""
        index, text, held = state.index, "".join(state.text), state.held
        state.index, state.text, state.held = None, [], []
        if not self._judges_text(text):
            return [*held, stop]
        number = index if type(index) is int else -1
        judging = asyncio.create_task(self._judge_text(text, ctx))
        if not held:
            # Sent already: judged while the upstream streams on, settled at the end.
            state.pending.append((number, judging))
            return [stop]
        return asyncio.create_task(self._settled_events(judging, index, held, stop, ctx))

    async def _settled_events(
        self,
        judging: asyncio.Task[Outcome],
        index: Any,
        held: list[StreamEvent],
        stop: StreamEvent,
        ctx: PolicyContext,
    ) -> list[StreamEvent]:
        number = index if type(index) is int else -1
        replacement = self._settled_text(number, await judging, ctx)
        if replacement is None:
            return [*held, stop]
        return text_block_events(index, replacement, stop)

    async def before_message_delta(self, ctx: PolicyContext) -> list[StreamEvent]:
        state = ctx.state(self._text_key, TextState)
        pending, state.pending = state.pending, []
        for number, task in pending:
            self._settled_text(number, await task, ctx, after_sent=True)
        return []

    async def on_stream_end(self, ctx: PolicyContext) -> list[StreamEvent]:
        await self.before_message_delta(ctx)
        return await super().on_stream_end(ctx)
