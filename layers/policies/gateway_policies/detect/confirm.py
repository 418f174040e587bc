"""What a rule finds in a text: one `re` pass's matches, whole or only where they may start.

Both engines end here, so they cannot differ in what a match means: the
`secret` group's span (the whole match without one), kept when the validator,
if any, accepts its text. The Hyperscan engine runs `finditer` only from the
starts its match ends allow (`windows`), or `match` only at the starts a
reversed scan reported (`at_starts`); from any other start `re` finds
nothing, so the matches are those of one pass over the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from .rule import Rule

Span = tuple[int, int]

LOOKS_PAST = 2
"""Characters a rule may read past its match (`\\b`, `$` before a final newline)."""


def accepted(rule: Rule, match: re.Match[str]) -> Span | None:
    start, end = match.span("secret") if "secret" in match.re.groupindex else match.span()
    if start < 0:
        start, end = match.span()
    if rule.validator is not None and not rule.validator(match.string[start:end]):
        return None
    return start, end


def matches(
    pattern: re.Pattern[str], text: str, position: int = 0, stop: int | None = None
) -> Iterator[re.Match[str]]:
    """`finditer`, except that each search resumes where the last match's secret ended: a
    delimiter one match consumed (a rule cannot look behind) may begin the next (`AKIA…,AKIA…`)."""
    end = len(text) if stop is None else stop
    while (match := pattern.search(text, position, end)) is not None:
        yield match
        position = resumes_at(match)


def resumes_at(match: re.Match[str]) -> int:
    """Where the search after `match` starts: its secret's end, always past its start."""
    secret = "secret" in match.re.groupindex and match.start("secret") >= 0
    return max(match.end("secret") if secret else match.end(), match.start() + 1)


def everywhere(rule: Rule, pattern: re.Pattern[str], text: str) -> Iterator[Span]:
    for match in matches(pattern, text):
        span = accepted(rule, match)
        if span is not None:
            yield span


def windows(
    rule: Rule, pattern: re.Pattern[str], text: str, starts: Sequence[Span]
) -> Iterator[Span]:
    """The matches of one pass over `text` that start within the sorted, disjoint `starts`."""
    done = 0
    reach = rule.max_length + LOOKS_PAST
    for low, high in starts:
        for match in matches(pattern, text, max(low, done), min(len(text), high + reach)):
            if match.start() > high:
                break
            done = resumes_at(match)
            span = accepted(rule, match)
            if span is not None:
                yield span


def at_starts(
    rule: Rule, pattern: re.Pattern[str], text: str, starts: Iterable[int]
) -> Iterator[Span]:
    """The matches of one pass over `text`, given every position where a match starts (and
    perhaps others, where `match` finds nothing): each tried once, in order, from where the
    last match let the search resume."""
    done = 0
    for start in sorted(set(starts)):
        if start < done:
            continue
        match = pattern.match(text, start)
        if match is None:
            continue
        done = resumes_at(match)
        span = accepted(rule, match)
        if span is not None:
            yield span


SKIPPED = "_skipped"
"""The group of a `starter` that holds the positions it went past."""


def starter(head: str, flags: int, width: int) -> re.Pattern[str]:
    """`head` after a lazy run of at most `width - 1` characters: matched at a position, it
    finds the first of the next `width` positions where `head` matches, trying each in turn
    inside `re`, not one Python call per position."""
    skipped = f"(?P<{SKIPPED}>(?s:.){{0,{width - 1}}}?)"
    return re.compile(f"{skipped}(?:{head})", flags)


def head_starts(
    search: re.Pattern[str], width: int, text: str, starts: Sequence[Span]
) -> list[int]:
    """Every position within `starts` where a rule's head matches, found by its `starter` of
    `width` (a keyword window's): where a rule with a `lead` may start a match, for
    `at_starts` to try. A run of keywords, each a window, costs one `re` call per window and
    one per start found, and rules that share a head share this work."""
    found: list[int] = []
    for low, high in starts:
        position = low
        while position <= high:
            match = search.match(text, position)
            if match is None:
                position += width
                continue
            start = match.end(SKIPPED)
            if start > high:
                break
            found.append(start)
            position = start + 1
    return found
