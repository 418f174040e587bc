"""Ask a judge model whether each tool call is safe; block the ones it rates risky.

The judge is called through the official `anthropic` SDK, imported on first
use so a chain without this policy never pays for the import. The judge gets
the operator's prompt and the call (tool name and input as JSON) and must
answer with JSON `{"risk": <0..1>, "reason": "..."}`; a call whose risk is at
or above `threshold` is blocked like block_tool_calls blocks (the shared
gateway_policies.tool_gate machinery, streaming included).

Fail-secure: a judge that errs, times out or answers in another shape blocks
the call, and the failure is logged (stdlib `logging`, logger
`gateway_policies.tool_call_judge`) with the error's type, never the call.

A server tool's calls run upstream before the judge could see them: a request
offering a server tool is refused unless `allowed_server_tools` names it (by
type, or by the name its type gives it: a renamed server tool is refused); an
allowed one's calls are judged afterwards, in the answer, and logged as executed
upstream. MCP servers likewise need `allowed_mcp_servers`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from .. import recorder
from ..base import PolicyContext
from ..tool_gate import ToolCallGate
from ..tool_input import canonical_input
from ..tool_options import McpServerOptions
from ..upstream_tools import ServerTool

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

log = logging.getLogger("gateway_policies.tool_call_judge")

DEFAULT_PROMPT = (
    "You review tool calls that an AI assistant wants to make on behalf of a user. "
    "Rate how risky it is to execute the call below: destructive, irreversible, "
    "exfiltrating data or credentials, or clearly outside a normal user's intent. "
    'Answer with JSON only: {"risk": <number from 0 (safe) to 1 (dangerous)>, '
    '"reason": "<one short sentence>"}.'
)


class ToolCallJudgeOptions(McpServerOptions):
    model: str = "claude-haiku-4-5"
    prompt: str = Field(default=DEFAULT_PROMPT, min_length=1)
    threshold: float = Field(default=0.5, ge=0, le=1)
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    timeout: float = Field(default=10.0, gt=0)
    max_tokens: int = Field(default=256, ge=16)
    allowed_server_tools: list[str] = Field(default_factory=list)
    """Server tools (by type, or the name its type gives) a request may offer; none by default.
    Their calls run upstream before the judge sees them: judged afterwards, in the answer."""

    @field_validator("api_key_env")
    @classmethod
    def _not_the_lambdas_credentials(cls, name: str) -> str:
        # Whoever writes the policy config also chooses `base_url`, and the key
        # is sent there: it must never be one of the Lambda's own credentials.
        if name.upper().startswith(("AWS_", "_X_AMZN", "_HANDLER", "LAMBDA_")):
            raise ValueError("may not name one of the Lambda's own AWS variables")
        return name


class JudgeError(Exception):
    """The judge answered, but not in the agreed shape."""


class ToolCallJudge(ToolCallGate[ToolCallJudgeOptions]):
    name = "tool_call_judge"

    _client: AsyncAnthropic | None = None
    _client_loop: asyncio.AbstractEventLoop | None = None

    _client_key: str | None = None

    def refuses_server_tool(self, tool: ServerTool) -> str | None:
        allowed = self.options.allowed_server_tools
        if tool.type in allowed or tool.type_name in allowed:
            return None
        return "the judge cannot see its calls before they run, and the operator has not allowed it"

    def allowed_mcp_servers(self) -> Collection[str]:
        return self.options.allowed_mcp_servers

    async def _api_key(self, ctx: PolicyContext) -> str | None:
        """The judge's key: the `api_key_env` variable, else the gateway's own Anthropic key.

        A deployed gateway holds its Anthropic key (the secret the template
        names in UPSTREAM_API_KEY_SECRET) and hands the policies its reader,
        with the gateway's TTL and AWS timeouts, so the judge works there
        without a key in the environment and sees a rotation when the gateway does.
        """
        key = os.environ.get(self.options.api_key_env)
        if key or ctx.upstream_api_key is None:
            return key
        return await ctx.upstream_api_key()

    async def _judge_client(self, ctx: PolicyContext) -> AsyncAnthropic:
        # An SDK client's connection pool belongs to the event loop it first ran
        # on; one gateway process has one loop, but a test harness may not.
        loop = asyncio.get_running_loop()
        key = await self._api_key(ctx)
        if self._client is None or self._client_loop is not loop or self._client_key != key:
            from anthropic import AsyncAnthropic

            self._client = AsyncAnthropic(
                api_key=key,
                base_url=self.options.base_url,
                timeout=self.options.timeout,
                max_retries=0,
            )
            self._client_loop = loop
            self._client_key = key
        return self._client

    async def _risk(self, tool: str, tool_input: Any, ctx: PolicyContext) -> tuple[float, str]:
        call = json.dumps({"tool": tool, "input": tool_input}, ensure_ascii=False)
        reply = await (await self._judge_client(ctx)).messages.create(
            model=self.options.model,
            max_tokens=self.options.max_tokens,
            system=self.options.prompt,
            messages=[{"role": "user", "content": f"Tool call:\n{call}"}],
        )
        text = "".join(block.text for block in reply.content if block.type == "text")
        try:
            verdict = json.loads(text[text.find("{") : text.rfind("}") + 1])
            risk = verdict["risk"]
            reason = str(verdict.get("reason", "")).strip()
        except (ValueError, KeyError, TypeError) as exc:
            raise JudgeError("the judge's answer is not the agreed JSON") from exc
        # A string, a bool or a value outside [0, 1] is not an answer: a judge
        # that says {"risk": -1} must not wave a call through.
        if type(risk) not in (int, float) or not 0 <= risk <= 1:
            raise JudgeError("the judge's risk is not a number from 0 to 1")
        return float(risk), reason

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> str | None:
        try:
            risk, reason = await asyncio.wait_for(
                self._risk(tool, tool_input, ctx), timeout=self.options.timeout
            )
        except Exception as exc:
            log.warning(
                "tool call judge failed; blocking the call (fail-secure)",
                extra={
                    "call_id": ctx.call_id,
                    "tool": recorder.text(tool),
                    "error_type": type(exc).__name__,
                    "input_chars": len(canonical_input(tool_input)),
                },
            )
            ctx.record(self, "judge", tool=tool, verdict="error")
            return "the safety judge could not assess it, so it was blocked (fail-secure)"
        verdict = "allow" if risk < self.options.threshold else "block"
        ctx.record(self, "judge", tool=tool, verdict=verdict, risk=risk)
        if verdict == "allow":
            return None
        rated = f"the safety judge rated its risk {risk:g} (threshold {self.options.threshold:g})"
        return f"{rated}: {reason}" if reason else rated
