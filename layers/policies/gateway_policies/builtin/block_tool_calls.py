"""Block tool calls whose name and/or input match operator rules.

Each rule is `{"tool": regex, "input": regex}`; either key may be omitted.
A regex is searched anywhere in its text (`re.search`, not anchored). The
input is matched as JSON with sorted keys (`json.dumps(..., sort_keys=True)`),
the same text whether the response streams or not. When a rule has both keys,
both must match. A blocked call becomes a text block saying what was blocked
and why (see gateway_policies.tool_gate).

Server tools run upstream, before any call of theirs can be checked: a request
offering one whose name (or, for code execution, a name its calls carry) a
rule's `tool` matches is refused before anything is sent, whatever the rule's
`input` says. MCP servers are refused unless `allowed_mcp_servers` lists them.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from pydantic import Field, field_validator, model_validator

from ..base import PolicyContext
from ..options import PolicyOptions
from ..tool_gate import ToolCallGate, canonical_input
from ..tool_options import McpServerOptions
from ..upstream_tools import ServerTool


class ToolRule(PolicyOptions):
    tool: str | None = None
    input: str | None = None

    @field_validator("tool", "input")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> ToolRule:
        if self.tool is None and self.input is None:
            raise ValueError("a rule needs 'tool', 'input' or both")
        return self

    def describe(self) -> str:
        pairs = (("tool", self.tool), ("input", self.input))
        return " and ".join(f"{key} ~ /{value}/" for key, value in pairs if value is not None)


class BlockToolCallsOptions(McpServerOptions):
    rules: list[ToolRule] = Field(min_length=1)


class BlockToolCalls(ToolCallGate[BlockToolCallsOptions]):
    name = "block_tool_calls"

    def setup(self) -> None:
        self._rules = [
            (
                rule,
                None if rule.tool is None else re.compile(rule.tool),
                None if rule.input is None else re.compile(rule.input),
            )
            for rule in self.options.rules
        ]

    def refuses_server_tool(self, tool: ServerTool) -> str | None:
        for number, (rule, tool_re, _) in enumerate(self._rules, start=1):
            if tool_re is not None and any(tool_re.search(name) for name in tool.identities):
                if rule.input is None:
                    return f"it matches rule {number} ({rule.describe()})"
                return (
                    f"rule {number} ({rule.describe()}) names it, and its input cannot be "
                    "checked before it runs"
                )
        return None

    def allowed_mcp_servers(self) -> Collection[str]:
        return self.options.allowed_mcp_servers

    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> str | None:
        # The JSON text, then every string value as the tool will see it: in JSON
        # a tab or newline is the two characters \\t / \\n, so `rm\\s+-rf` would
        # miss `rm<TAB>-rf` in the JSON text alone.
        text = "\n".join([canonical_input(tool_input), *_strings(tool_input)])
        for number, (rule, tool_re, input_re) in enumerate(self._rules, start=1):
            if (tool_re is None or tool_re.search(tool)) and (
                input_re is None or input_re.search(text)
            ):
                return f"it matches rule {number} ({rule.describe()})"
        return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []
