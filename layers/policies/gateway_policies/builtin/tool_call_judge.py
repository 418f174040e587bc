"""Ask a judge model how risky each tool call is; block the ones it rates risky.

On the judge core (gateway_policies.judge): the judge gets the operator's
`prompt` as its rules and the call (tool name and input) as data inside the
nonce delimiter, and answers only by the forced `verdict` tool, which here
carries `risk` (0..1) besides the decision. A call is blocked when the judge
decides `block` or rates its risk at or above `threshold`: the stricter of
the two. Blocked calls look as block_tool_calls' do (gateway_policies.tool_gate,
streaming included).

Fail-secure by default: a judge that errs, times out, answers in text or
breaks the verdict schema blocks the call (`on_error: "allow"` lets it
through with a note). Every verdict and error is recorded (action `judge`,
the call line's `judge_usage`, the Judge* metrics).

A server tool's calls run upstream before the judge could see them: a request
offering a server tool is refused unless `allowed_server_tools` names it (by
type, or by the name its type gives it: a renamed server tool is refused); an
allowed one's calls are judged afterwards, in the answer, and logged as executed
upstream. MCP servers likewise need `allowed_mcp_servers`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import Field

from ..base import PolicyContext
from ..blocked_call import Block
from ..judge.core import Judge
from ..judge.gate import JudgingGate
from ..judge.options import JudgeOptions
from ..judge.verdict import BLOCK
from ..tool_options import McpServerOptions
from ..upstream_tools import ServerTool

DEFAULT_PROMPT = (
    "You review tool calls that an AI assistant wants to make on behalf of a user. "
    "Rate how risky it is to execute the call: destructive, irreversible, exfiltrating "
    "data or credentials, or clearly outside a normal user's intent. Give `risk` from 0 "
    '(safe) to 1 (dangerous), and decide "block" for a call that should not run.'
)


class ToolCallJudgeOptions(McpServerOptions, JudgeOptions):
    prompt: str = Field(default=DEFAULT_PROMPT, min_length=1)
    threshold: float = Field(default=0.5, ge=0, le=1)
    max_tokens: int = Field(default=256, ge=16, le=8192)
    allowed_server_tools: list[str] = Field(default_factory=list)
    """Server tools (by type, or the name its type gives) a request may offer; none by default.
    Their calls run upstream before the judge sees them: judged afterwards, in the answer."""


class ToolCallJudge(JudgingGate[ToolCallJudgeOptions]):
    name = "tool_call_judge"

    def setup(self) -> None:
        self.judge = Judge(
            self, self.options, self.options.prompt, threshold=self.options.threshold
        )

    def refuses_server_tool(self, tool: ServerTool) -> str | None:
        allowed = self.options.allowed_server_tools
        if tool.type in allowed or tool.type_name in allowed:
            return None
        return "the judge cannot see its calls before they run, and the operator has not allowed it"

    def allowed_mcp_servers(self) -> Collection[str]:
        return self.options.allowed_mcp_servers

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> Block | None:
        outcome = await self.judge_call(tool, tool_input, ctx)
        verdict = outcome.verdict
        if verdict is None:
            return None if outcome.unjudged else Block(outcome.reason())
        if verdict.decision != BLOCK:
            return None
        risk = verdict.risk if verdict.risk is not None else 1.0
        rated = f"the safety judge rated its risk {risk:g} (threshold {self.options.threshold:g})"
        return Block(f"{rated}: {verdict.reason}" if verdict.reason else rated)
