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


def starter(pattern: re.Pattern[str], width: int) -> re.Pattern[str]:
    """`pattern` after a lazy run of at most `width - 1` characters: matched at a position, it
    finds the first of the next `width` positions where `pattern` matches, trying each in
    turn inside `re`, not one Python call per position."""
    skipped = f"(?P<{SKIPPED}>(?s:.){{0,{width - 1}}}?)"
    return re.compile(f"{skipped}(?:{pattern.pattern})", pattern.flags)


def anchored(
    rule: Rule,
    pattern: re.Pattern[str],
    text: str,
    starts: Sequence[Span],
    first: tuple[re.Pattern[str], int],
) -> Iterator[Span]:
    """`windows` for a rule whose matches start within `starts` (a rule with a `lead`): `re`
    tries a match only from each position there, as `at_starts` would, never searching on over
    the rule's reach from a position where none starts (a keyword in the wrong case, a near
    match). `first` is the rule's `starter` and its width: a run of keywords, each a window to
    try, costs one `re` call per window."""
    find, width = first
    done = 0
    for low, high in starts:
        position = max(low, done)
        while position <= high:
            found = find.match(text, position)
            if found is None:
                position += width
                continue
            start = found.end(SKIPPED)
            if start > high:
                break
            # The same match `at_starts` would make there (the starter's own match
            # spans the positions it went past too).
            match = pattern.match(text, start)
            if match is None:
                position = start + 1
                continue
            done = position = resumes_at(match)
            span = accepted(rule, match)
            if span is not None:
                yield span
