"""Block tool calls whose name and/or input match operator rules.

Each rule is `{"tool": regex, "input": regex}`; either key may be omitted
(how rules match: gateway_policies.tool_rules). A blocked call becomes a text
block saying what was blocked and why (see gateway_policies.tool_gate).

Server tools run upstream, before any call of theirs can be checked: a request
offering one whose name (or, for code execution, a name its calls carry) a
rule's `tool` matches is refused before anything is sent, whatever the rule's
`input` says. MCP servers are refused unless `allowed_mcp_servers` lists them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import Field

from ..base import PolicyContext
from ..tool_gate import ToolCallGate
from ..tool_options import McpServerOptions
from ..tool_rules import ToolRule, ToolRules
from ..upstream_tools import ServerTool


class BlockToolCallsOptions(McpServerOptions):
    rules: list[ToolRule] = Field(min_length=1)


class BlockToolCalls(ToolCallGate[BlockToolCallsOptions]):
    name = "block_tool_calls"

    def setup(self) -> None:
        self._rules = ToolRules(self.options.rules)

    def refuses_server_tool(self, tool: ServerTool) -> str | None:
        return self._rules.naming_server_tool(tool)

    def allowed_mcp_servers(self) -> Collection[str]:
        return self.options.allowed_mcp_servers

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> str | None:
        return self._rules.matching(tool, tool_input)
