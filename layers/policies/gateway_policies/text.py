"""A base for policies that rewrite the text of a request (slots.py says where it lives).

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
from typing import Any, ClassVar

from .base import JSONObject, OptionsT, Policy, PolicyContext, StreamEvent
from .slots import Slot, response_text_slots, text_slots
from .turns import in_turns

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
