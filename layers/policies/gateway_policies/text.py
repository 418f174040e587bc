"""Where the text of a Messages request lives, for policies that rewrite text.

Text sits in the system prompt (a string or text blocks), in message content
(a string or blocks), inside tool_result and search_result blocks, and in
plain-text documents (a `text` source's data, a `content` source's blocks).
`thinking` and `redacted_thinking` blocks are never yielded: the API checks
their signatures, so changing a byte of them breaks every later turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

_SKIPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def _content_slots(holder: Any, key: Any) -> Iterator[tuple[Any, Any]]:
    value = holder[key]
    if isinstance(value, str):
        yield holder, key
        return
    if not isinstance(value, list):
        return
    for block in value:
        if not isinstance(block, dict) or block.get("type") in _SKIPPED_BLOCKS:
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            yield block, "text"
        elif kind in ("tool_result", "search_result") and "content" in block:
            yield from _content_slots(block, "content")
        elif kind == "document":
            yield from _document_slots(block)


def _document_slots(block: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """A plain-text document's text, its content blocks, and its `context` note."""
    if isinstance(block.get("context"), str):
        yield block, "context"
    source = block.get("source")
    if not isinstance(source, dict):
        return
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        yield source, "data"
    elif source.get("type") == "content" and "content" in source:
        yield from _content_slots(source, "content")


def text_slots(request: dict[str, Any], *, system: bool = True) -> Iterator[tuple[Any, Any]]:
    """Yield (container, key) pairs whose `container[key]` is a text string."""
    if system and "system" in request:
        yield from _content_slots(request, "system")
    messages = request.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict) and "content" in message:
                yield from _content_slots(message, "content")


def response_text_slots(response: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Yield the text slots of a Messages response's content blocks."""
    if "content" in response:
        yield from _content_slots(response, "content")


def rewrite_text(slots: Iterator[tuple[Any, Any]], rewrite: Callable[[str], str]) -> None:
    """Apply `rewrite` to every slot, writing back only what changed."""
    for container, key in list(slots):
        old = container[key]
        new = rewrite(old)
        if new != old:
            container[key] = new
