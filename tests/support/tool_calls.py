"""Tool calls as the tool policies' tests need them: the tools offered, an upstream answer
that calls them (JSON or a stream) or is made of any blocks, the beta API that reads
every block type, and what an answer's blocks are."""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.types import Message
from anthropic.types.beta import BetaMessage
from gateway_policies.testing import as_pairs, assemble, stream, text_block, tool_use_block

from .fake_upstream import Reply, message
from .sdk import with_defaults

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


def ask_beta(client: anthropic.Anthropic, streaming: bool, **params: Any) -> BetaMessage:
    """The beta Messages API, which knows every server tool and MCP block type."""
    params = with_defaults(**params)
    if streaming:
        with client.beta.messages.stream(**params) as events:
            return events.get_final_message()
    reply: BetaMessage = client.beta.messages.create(**params)
    return reply


def answer(streaming: bool, *blocks: list[Any], stop_reason: str = "end_turn") -> Reply:
    """An upstream answer made of these blocks (builders from gateway_policies.testing)."""
    events = stream(*blocks, stop_reason=stop_reason)
    if streaming:
        return Reply(events=as_pairs(events))
    content = assemble(events)["content"]
    return Reply(body=message("", content=content) | {"stop_reason": stop_reason})
