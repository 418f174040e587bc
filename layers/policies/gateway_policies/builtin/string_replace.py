"""Replace literal strings in request and/or response text.

Reaches string content, text blocks, tool_result text and the system prompt;
never thinking or redacted_thinking blocks. In a stream, text deltas are
rewritten one delta at a time, so a match split across two deltas is not seen.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..options import PolicyOptions
from ..text import TextRewriter


class StringReplaceOptions(PolicyOptions):
    replacements: list[tuple[str, str]] = Field(min_length=1)
    apply_to: Literal["request", "response", "both"] = "request"


class StringReplace(TextRewriter[StringReplaceOptions]):
    name = "string_replace"

    def setup(self) -> None:
        self.rewrites_requests = self.options.apply_to in ("request", "both")
        self.rewrites_responses = self.options.apply_to in ("response", "both")

    def rewrite(self, text: str) -> str:
        return self.rewrite_counted(text)[0]

    def rewrite_counted(self, text: str) -> tuple[str, dict[str, int]]:
        count = 0
        for old, new in self.options.replacements:
            if old and old in text:
                count += text.count(old)
                text = text.replace(old, new)
        return text, ({"": count} if count else {})
