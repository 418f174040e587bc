"""Where the text of a Messages request lives.

Text sits in the system prompt (a string or text blocks), in message content
(a string or blocks), inside tool_result and search_result blocks, and in
plain-text documents (a `text` source's data, a `content` source's blocks).
`thinking` and `redacted_thinking` blocks are never yielded: the API checks
their signatures, so changing a byte of them breaks every later turn. Asked
for (`tool_inputs`), each string value inside the `input` of a `tool_use` or
`server_tool_use` block too (never a key, so the JSON keeps its shape). Never
ids, `signature`, `encrypted_content`/`encrypted_index`, base64 data,
`file_id`, `cache_control` or `mcp_servers` (whose tokens the API needs):
only the fields named here are text.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

from .turns import BATCH

_TOOL_CALLS = frozenset({"tool_use", "server_tool_use"})


Slot = tuple[Any, Any]


def _content_slots(holder: Any, key: Any, tool_inputs: bool = False) -> list[Slot]:
    """The slots of one message's or block's content, collected."""
    slots: list[Slot] = []
    _collect_content(holder, key, tool_inputs, slots)
    return slots


def _collect_content(holder: Any, key: Any, tool_inputs: bool, slots: list[Slot]) -> None:
    value = holder[key]
    if isinstance(value, str):
        slots.append((holder, key))
    elif isinstance(value, list):
        _collect_blocks(value, tool_inputs, slots)


def _collect_blocks(blocks: list[Any], tool_inputs: bool, slots: list[Slot]) -> None:
    """The slots of a list of content blocks. A session's every turn walks its whole
    history, so the common blocks (a tool result, a tool call whose input is flat
    strings, a text) cost no call of their own; the rarest kinds are tested last."""
    append = slots.append
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_result" or kind == "search_result":
            inner = block.get("content")
            if isinstance(inner, str):
                append((block, "content"))
            elif isinstance(inner, list):
                _collect_blocks(inner, tool_inputs, slots)
        elif kind in _TOOL_CALLS:
            if not tool_inputs or "input" not in block:
                continue
            value = block["input"]
            if isinstance(value, dict):
                mark = len(slots)
                for name, item in value.items():
                    if not isinstance(item, str):
                        del slots[mark:]
                        _collect_strings(block, "input", slots)
                        break
                    append((value, name))
            else:
                _collect_strings(block, "input", slots)
        elif kind == "text":
            if isinstance(block.get("text"), str):
                append((block, "text"))
        elif kind == "document":
            _collect_document(block, slots)


def _collect_strings(holder: Any, key: Any, slots: list[Slot]) -> None:
    """Every string inside `holder[key]`, however deep, as (container, key); iterative,
    so a deeply nested input cannot exhaust the stack."""
    pending = [(holder, key)]
    while pending:
        container, at = pending.pop()
        value = container[at]
        if isinstance(value, str):
            slots.append((container, at))
        elif isinstance(value, dict):
            pending += [(value, name) for name in reversed(list(value))]
        elif isinstance(value, list):
            pending += [(value, index) for index in reversed(range(len(value)))]


def _collect_document(block: dict[str, Any], slots: list[Slot]) -> None:
    """A plain-text document's text, its content blocks, and its `context` note."""
    if isinstance(block.get("context"), str):
        slots.append((block, "context"))
    source = block.get("source")
    if not isinstance(source, dict):
        return
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        slots.append((source, "data"))
    elif source.get("type") == "content" and "content" in source:
        _collect_content(source, "content", False, slots)


def _slot_lists(request: dict[str, Any], system: bool, tool_inputs: bool) -> Iterator[list[Slot]]:
    """The request's slots in lists of about BATCH, a message's at a time."""
    slots: list[Slot] = []
    if system and "system" in request:
        _collect_content(request, "system", False, slots)
    messages = request.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if not isinstance(message, dict) or "content" not in message:
                continue
            content = message["content"]
            if isinstance(content, str):
                slots.append((message, "content"))
            elif isinstance(content, list):
                _collect_blocks(content, tool_inputs, slots)
            if len(slots) >= BATCH:
                yield slots
                slots = []
    yield slots


def text_slots(
    request: dict[str, Any], *, system: bool = True, tool_inputs: bool = False
) -> Iterator[Slot]:
    """Yield (container, key) pairs whose `container[key]` is a text string; with
    `tool_inputs`, the strings in tool calls' inputs too. Lazy, a few messages at a
    time, so a hook taking them in turns (turns.py) never walks a whole huge request at
    once; the slots come out of lists, not one generator step each (a session's every
    turn walks them all)."""
    return chain.from_iterable(_slot_lists(request, system, tool_inputs))


def response_text_slots(response: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Yield the text slots of a Messages response's content blocks."""
    if "content" in response:
        yield from _content_slots(response, "content")
