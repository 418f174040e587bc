"""Operator rules naming tool calls: `{"tool": regex, "input": regex}`, and how they match.

One semantics for every policy that names calls by rule (block_tool_calls'
`rules`, flow_guard's `sinks`). A regex is searched anywhere in its text
(`re.search`, not anchored). The input is matched as JSON with sorted keys
(`canonical_input`), the same text whether the response streams or not, then
as every string value the tool will see. When a rule has both keys, both must
match. A server tool whose name (or a name its calls carry) a rule's `tool`
matches is named by it, whatever the rule's `input` says: that input exists
only once the tool has run upstream.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import field_validator, model_validator

from .options import PolicyOptions
from .tool_input import canonical_input
from .upstream_tools import ServerTool


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


class ToolRules:
    """A list of rules, compiled once (in a policy's `setup`)."""

    def __init__(self, rules: Sequence[ToolRule]) -> None:
        self._rules = [
            (
                rule,
                None if rule.tool is None else re.compile(rule.tool),
                None if rule.input is None else re.compile(rule.input),
            )
            for rule in rules
        ]

    def naming_server_tool(self, tool: ServerTool) -> str | None:
        """Why a rule names this server tool (by its `tool` alone), or None."""
        for number, (rule, tool_re, _) in enumerate(self._rules, start=1):
            if tool_re is not None and any(tool_re.search(name) for name in tool.identities):
                if rule.input is None:
                    return f"it matches rule {number} ({rule.describe()})"
                return (
                    f"rule {number} ({rule.describe()}) names it, and its input cannot be "
                    "checked before it runs"
                )
        return None

    def matching(self, tool: str, tool_input: Any) -> str | None:
        """Which rule a call matches, said for the client, or None."""
        # The JSON text, then every string value as the tool will see it: in JSON
        # a tab or newline is the two characters \\t / \\n, so `rm\\s+-rf` would
        # miss `rm<TAB>-rf` in the JSON text alone.
        text: str | None = None
        for number, (rule, tool_re, input_re) in enumerate(self._rules, start=1):
            if tool_re is not None and not tool_re.search(tool):
                continue
            if input_re is not None:
                if text is None:
                    text = "\n".join([canonical_input(tool_input), *_strings(tool_input)])
                if not input_re.search(text):
                    continue
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
