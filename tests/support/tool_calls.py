"""Tool calls as the tool policies' tests need them: the tools offered, an upstream answer
that calls them (JSON or a stream), and what an answer's blocks are."""

from __future__ import annotations

from typing import Any

from anthropic.types import Message
from gateway_policies.testing import as_pairs, stream, text_block, tool_use_block

from .fake_upstream import Reply, message

TOOLS: list[Any] = [
    {"name": n, "description": n, "input_schema": {"type": "object"}} for n in ("bash", "read")
]
BASH_RM = {"tool": "^bash$", "input": "rm -rf"}


def tool_reply(streaming: bool, *calls: tuple[str, dict[str, Any]], text: str = "") -> Reply:
    """An upstream answer with an optional text block, then one tool_use block per call."""
    if streaming:
        blocks = [text_block(0, text)] if text else []
        first = len(blocks)
        blocks += [tool_use_block(first + i, name, args) for i, (name, args) in enumerate(calls)]
        return Reply(events=as_pairs(stream(*blocks, stop_reason="tool_use")))
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(calls)
    ]
    return Reply(body=message("", content=content) | {"stop_reason": "tool_use"})


def kinds(reply: Message) -> list[str]:
    return [block.type for block in reply.content]
