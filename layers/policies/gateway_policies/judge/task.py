"""The user's own words, for `context: "task"`: what the judge needs to tell intent from drift.

Trusted text as flow_guard defines it: the text blocks of user-role messages
(never a tool result, which is what a tool wrote), latest first, at most
`context_bytes` bytes of UTF-8 in all; with `include_system`, the system
prompt's first `context_bytes` bytes first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _user_texts(request: dict[str, Any]) -> Iterator[str]:
    messages = request.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield content
            continue
        for block in reversed(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str):
                    yield text


def _system(request: dict[str, Any]) -> str:
    system = request.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(
            block["text"]
            for block in system
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


def _cut(text: str, limit: int) -> str:
    return text.encode("utf-8", "ignore")[:limit].decode("utf-8", "ignore")


def task_context(
    request: dict[str, Any], context_bytes: int, *, include_system: bool = False
) -> tuple[str, ...]:
    """The user's words in `request`, latest first, bounded as the module says."""
    kept: list[str] = []
    if include_system:
        system = _cut(_system(request), context_bytes)
        if system:
            kept.append(system)
    left = context_bytes
    for text in _user_texts(request):
        if left <= 0:
            break
        piece = _cut(text, left)
        if piece:
            kept.append(piece)
            left -= len(piece.encode())
    return tuple(kept)
