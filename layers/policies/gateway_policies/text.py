"""Where the text of a Messages request lives, and a base for policies that rewrite it.

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

`TextRewriter` is the base of a policy that is one `rewrite(text) -> text`:
it applies it to every such place of a request and, when asked, of a
response and a stream's text, and records what it changed for the audit trail.
`subn_in_windows` runs a costly pattern over long text without holding the
interpreter lock for the whole of it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from itertools import chain
from typing import Any, ClassVar

from .base import JSONObject, OptionsT, Policy, PolicyContext, StreamEvent
from .turns import BATCH, in_turns

_TOOL_CALLS = frozenset({"tool_use", "server_tool_use"})

WINDOW = 1 << 18
"""How many start positions one `re` call of a windowed pattern tries: about 35 ms at worst."""


def subn_in_windows(
    pattern: re.Pattern[str],
    replace: Callable[[re.Match[str]], str],
    text: str,
    longest: int,
    window: int = WINDOW,
) -> tuple[str, int]:
    """`pattern.subn(replace, text)`, one window of start positions per `re` call.

    Exact for a pattern whose matches are at most `longest` characters and that
    looks at nothing past its match: a match starting in a window ends before
    the window's reach, and `\\b` at a window's start still sees the character
    before it. Between calls the interpreter lock can pass to other threads.
    """
    if len(text) <= window + longest:
        return pattern.subn(replace, text)
    pieces: list[str] = []
    count = done = start = 0
    while start < len(text):
        stop = start + window
        for match in pattern.finditer(text, start, stop + longest):
            if match.start() >= stop:
                break
            pieces += (text[done : match.start()], replace(match))
            done = match.end()
            count += 1
        start = max(stop, done)
    pieces.append(text[done:])
    return "".join(pieces), count


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


def rewrite_text(slots: Iterator[tuple[Any, Any]], rewrite: Callable[[str], str]) -> None:
    """Apply `rewrite` to every slot, writing back only what changed."""
    for container, key in list(slots):
        old = container[key]
        new = rewrite(old)
        if new != old:
            container[key] = new


Rewritten = list[tuple[int, str, Mapping[str, int]]]
"""Of a batch of texts, each one a rewrite changed or counted: its index in the batch,
its new value and how many changes of each kind made it. The others are left out, so
a batch that changed nothing costs no step per text after the rewrite."""


def _each(
    rewrite: Callable[[str], tuple[str, Mapping[str, int]]], texts: Sequence[str]
) -> Rewritten:
    rewritten: Rewritten = []
    for index, text in enumerate(texts):
        new, counts = rewrite(text)
        if counts or new != text:
            rewritten.append((index, new, counts))
    return rewritten


def rewrite_slots(
    slots: Sequence[Slot],
    rewrite_all: Callable[[Sequence[str]], Rewritten],
    tally: Counter[str],
) -> None:
    """Rewrite a batch of slots in one `rewrite_all`, writing back only what changed and
    adding its counts to `tally`: what a request hook does with each batch."""
    olds = [container[key] for container, key in slots]
    for index, new, counts in rewrite_all(olds):
        for kind, count in counts.items():
            tally[kind] += count
        if new != olds[index]:
            container, key = slots[index]
            container[key] = new


async def _rewrite_counting(
    slots: Iterator[Slot],
    rewrite_all: Callable[[Sequence[str]], Rewritten],
    tally: Counter[str],
) -> None:
    async for batch in in_turns(slots):
        rewrite_slots(batch, rewrite_all, tally)


class _StreamTally:
    """One call's count of a stream's changes, recorded once the stream ends."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()


class TextRewriter(Policy[OptionsT]):
    """A policy that is one `rewrite(text) -> text`, applied wherever text lives.

    Requests: the system prompt, message text, tool_result / search_result
    text and plain-text documents (`text_slots`). Responses, when
    `rewrites_responses` is set: the text blocks of a response and, in a
    stream, each text delta and text block start, one event at a time (a
    match split across two deltas is not seen). Thinking blocks never. Set
    the two flags as class attributes or in `setup` (from the options); the
    chain calls only the hooks they turn on.

    The audit trail is kept here, so a subclass records nothing itself: each
    request and each response that changed records `action` once per kind of
    change, with `where` ("request", "response" or "stream") and `count`; a
    stream's changes are recorded when it ends. `rewrite_counted` says what
    was changed; by default each changed text counts once, with no kind.
    """

    rewrites_requests: bool = True
    rewrites_responses: bool = False
    reaches_tool_inputs: ClassVar[bool] = False
    """Also rewrite each string in the inputs of the tool calls in a request's history."""
    action: ClassVar[str] = "rewrite"
    """What the audit trail calls a change this policy made (one of `actions.ACTIONS`)."""

    def rewrite(self, text: str) -> str:
        raise NotImplementedError

    def rewrite_counted(self, text: str) -> tuple[str, Mapping[str, int]]:
        """`rewrite(text)`, and how many changes of each kind it made ("" for no kind).

        Counts and kinds only: they go on the call's log line, so never the text.
        """
        new = self.rewrite(text)
        return new, ({"": 1} if new != text else {})

    def rewriter(self, ctx: PolicyContext) -> Callable[[str], tuple[str, Mapping[str, int]]]:
        """The `rewrite_counted` of one call (a policy that keeps state per caller picks it)."""
        return self.rewrite_counted

    def batch_rewriter(self, ctx: PolicyContext) -> Callable[[Sequence[str]], Rewritten]:
        """`rewriter(ctx)` of many texts at once (a policy that can do better overrides it)."""
        return partial(_each, self.rewriter(ctx))

    def implements(self, hook: str) -> bool:
        if hook == "on_request":
            return self.rewrites_requests
        return self.rewrites_responses and hook in (
            "on_response",
            "on_stream_event",
            "on_stream_end",
        )

    def _record(self, ctx: PolicyContext, where: str, tally: Mapping[str, int]) -> None:
        for kind, count in tally.items():
            if count:
                kinds = {"kind": kind} if kind else {}
                ctx.record(self, self.action, where=where, **kinds, count=count)

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        tally: Counter[str] = Counter()
        slots = text_slots(request, tool_inputs=self.reaches_tool_inputs)
        await _rewrite_counting(slots, self.batch_rewriter(ctx), tally)
        self._record(ctx, "request", tally)

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        tally: Counter[str] = Counter()
        await _rewrite_counting(response_text_slots(response), self.batch_rewriter(ctx), tally)
        self._record(ctx, "response", tally)

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        if event.type not in ("content_block_delta", "content_block_start"):
            return [event]
        payload = event.payload or {}
        part = payload.get("delta") or payload.get("content_block")
        if (
            isinstance(part, dict)
            and part.get("type") in ("text_delta", "text")
            and isinstance(part.get("text"), str)
        ):
            part["text"], counts = self.rewriter(ctx)(part["text"])
            if counts:
                ctx.state(self, _StreamTally).counts.update(counts)
        return [event]

    async def on_stream_end(self, ctx: PolicyContext) -> list[StreamEvent]:
        self._record(ctx, "stream", ctx.state(self, _StreamTally).counts)
        return []
