"""The Hyperscan engine: all of a rule set's rules in one pass, then `re` only where they end.

Hyperscan scans each text once for every rule at once (linear in the text,
whatever the rules) and reports where matches end, never where they start
(start-of-match tracking does not compile for large rules). Each end means a
match starts at most `max_length` characters before it, so `re` confirms only
there (confirm.windows), giving exactly one `re.finditer` pass's matches.

A rule whose reach is long (a PEM key, a bearer token) makes a large automaton
that compiles for seconds; it is looked for by its keywords instead, and `re`
confirms around each: a match contains one, so it starts within its reach
before the keyword's end, or within its `lead` when the rule knows it (a match
that starts at its keyword, as a Docker config's `"auth"` does, is confirmed
from there, however long its value: an ECR login's runs to thousands). A rule
that knows its `lead` is looked for by its keywords whatever its reach: a
command line's password option (`mysql … -p…`) has bounded repeats that cost
Hyperscan seconds to compile, and its keyword is where the match begins. Such a rule is
tried only where its head (Rule.head) matches, found with one `re` search per keyword window
that the rules of one family share (confirm.head_starts).

The text Hyperscan reads has one byte per character, so an index is the same
in both: ASCII as is, every other character as one non-ASCII byte. A rule
compiled with `re.ASCII` treats any such character exactly as Hyperscan treats
that byte (no class, no word character, no case), so Hyperscan's ends are
those `re` would find.

Where a match starts, Hyperscan says too: each rule found by its own pattern
is compiled a second time read right to left (detect.reverse), and scanned
over its windows reversed, once each, it reports every start of a match
there. `re` then tries those starts only (confirm.at_starts), each once: a
text of partial matches around real ones (`a…a@b-b-b-` then an address, over
and over) no longer makes `re` walk each partial match again from every
position of a window as long as the rule's reach.

Bounded work: a text where one rule ends or starts too often (a crafted body
of near matches) stops the scan, and the whole text is that rule's match: a
linear whole-value redaction instead of millions of confirmations.
"""

from __future__ import annotations

import codecs
import re
import threading
from collections import defaultdict
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import hyperscan

from .confirm import LOOKS_PAST, Span, at_starts, head_starts, starter, windows
from .reverse import reversed_pattern
from .rule import Rule
from .ruleset import RuleSet

LONG_REACH = 1024
"""Rules reaching further than this are found by their keywords (see the module's docstring)."""

EVENTS_FLOOR = 1024
EVENTS_PER_CHARACTER = 1 / 16
"""How many ends one text may report, over all rules, before it counts as dense (and as
many starts). The floor is what a short text may report whatever its length: a body spread
over many texts may cost each one its floor (4096 let 64 KB blocks of a keyword every six
characters cost 1.3 s per 6 MB); no ordinary text ends once per sixteen characters."""

CONFIRM_CHARACTERS = 256 * 1024
"""How much text `re` may confirm one rule on in one text before the text counts as dense."""

_ONE_BYTE = "one-byte-per-character"


def _non_ascii(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeEncodeError)
    return "\x80" * (error.end - error.start), error.end


codecs.register_error(_ONE_BYTE, _non_ascii)


def one_byte_per_character(text: str) -> bytes:
    """`text` as bytes of the same length: ASCII kept, Latin-1 as its byte, the rest as 0x80."""
    return text.encode("latin-1", _ONE_BYTE)


def _literal(keyword: str) -> bytes:
    return "".join(c if c.isalnum() else f"\\x{ord(c):02x}" for c in keyword).encode()


@dataclass(frozen=True)
class _Expression:
    rule: int
    keyword: int
    """The keyword's length for a keyword expression; 0 for the rule's own pattern."""


def _by_keywords(rule: Rule) -> bool:
    return bool(rule.keywords) and (rule.max_length > LONG_REACH or rule.lead is not None)


def _flags(rule: Rule) -> int:
    return hyperscan.HS_FLAG_CASELESS if rule.ignore_case else 0


def _compiled(sources: list[bytes], ids: list[int], flags: list[int]) -> hyperscan.Database:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    if sources:
        database.compile(expressions=sources, ids=ids, elements=len(sources), flags=flags)
    return database


def _expressions(rules: tuple[Rule, ...]) -> tuple[list[bytes], list[int], list[_Expression]]:
    sources: list[bytes] = []
    flags: list[int] = []
    meaning: list[_Expression] = []
    for index, rule in enumerate(rules):
        if _by_keywords(rule):
            for keyword in rule.keywords:
                sources.append(_literal(keyword))
                flags.append(hyperscan.HS_FLAG_CASELESS)
                meaning.append(_Expression(index, len(keyword)))
        else:
            sources.append(rule.pattern.replace("(?P<secret>", "(").encode())
            flags.append(_flags(rule))
            meaning.append(_Expression(index, 0))
    return sources, flags, meaning


class _Events:
    """One scan's match ends, by expression, until there are too many."""

    def __init__(self, budget: int) -> None:
        self.ends: dict[int, list[int]] = defaultdict(list)
        self.left = budget
        self.dense: int | None = None

    def __call__(self, expression: int, start: int, end: int, flags: int, context: Any) -> bool:
        # Called for every end of every rule: as little work as a call can do.
        self.ends[expression].append(end)
        self.left -= 1
        if self.left < 0:
            self.dense = expression
            return True
        return False

    def by_rule(self, meaning: list[_Expression]) -> dict[int, list[int]]:
        """The ends by rule, in catalogue order: a keyword's start stands for its end."""
        ends: dict[int, list[int]] = defaultdict(list)
        for expression, found in sorted(self.ends.items()):
            what = meaning[expression]
            ends[what.rule] += [end - what.keyword for end in found] if what.keyword else found
        return dict(sorted(ends.items()))


class _Starts:
    """One reversed scan's match starts, by rule, until there are too many."""

    def __init__(self, budget: int) -> None:
        self.starts: dict[int, list[int]] = defaultdict(list)
        self.left = budget
        self.dense: int | None = None
        self.edge = 0
        """Where the window being scanned ends in the text: its reversed scan's offset 0."""

    def __call__(self, rule: int, start: int, end: int, flags: int, context: Any) -> bool:
        self.starts[rule].append(self.edge - end)
        self.left -= 1
        if self.left < 0:
            self.dense = rule
            return True
        return False


class HyperscanEngine:
    """Two compiled databases per rule set (the rules, and those found by their own pattern
    read right to left), one scratch space per thread for each."""

    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset
        sources, flags, self._meaning = _expressions(ruleset.rules)
        self._database = _compiled(sources, list(range(len(sources))), flags)
        self._reversible = [n for n, rule in enumerate(ruleset.rules) if not _by_keywords(rule)]
        self._reversed = _compiled(
            [reversed_pattern(ruleset.rules[n].pattern).encode() for n in self._reversible],
            self._reversible,
            [_flags(ruleset.rules[n]) for n in self._reversible],
        )
        # A rule with a lead is confirmed where its head matches: rules that share a head
        # (one compiled search for them all) share that work in each text.
        searches: dict[tuple[str, int, int], re.Pattern[str]] = {}
        self._heads: dict[int, tuple[re.Pattern[str], int]] = {}
        for n, rule in enumerate(ruleset.rules):
            if _by_keywords(rule) and _lead(rule) != rule.max_length:
                head = (rule.head or rule.pattern, ruleset.compiled[n].flags, _lead(rule) + 2)
                if head not in searches:
                    searches[head] = starter(*head)
                self._heads[n] = (searches[head], head[2])
        self._local = threading.local()

    def _scratch(self, database: hyperscan.Database) -> hyperscan.Scratch:
        spaces: dict[int, hyperscan.Scratch] | None = getattr(self._local, "scratch", None)
        if spaces is None:
            spaces = self._local.scratch = {}
        scratch = spaces.get(id(database))
        if scratch is None:
            scratch = spaces[id(database)] = hyperscan.Scratch(database)
        return scratch

    def _match_starts(
        self, data: bytes, spans: list[Span], budget: int
    ) -> tuple[dict[int, list[int]], int | None]:
        """Every start of a match, by rule, in `spans` of `data` (a text's one byte per
        character), each span scanned once reversed with a margin for the anchors and `\\b`
        around it; or the rule that starts too often."""
        found = _Starts(budget)
        scratch = self._scratch(self._reversed)
        for low, high in _merged(sorted(spans)):
            begin, found.edge = max(0, low - LOOKS_PAST), min(len(data), high + LOOKS_PAST)
            with suppress(hyperscan.ScanTerminated):
                self._reversed.scan(
                    data[begin : found.edge][::-1], match_event_handler=found, scratch=scratch
                )
            if found.dense is not None:
                break
        return found.starts, found.dense

    def find(self, text: str) -> list[tuple[int, Span]]:
        """(rule index, span) of every match in `text`, by rule, each rule's in order."""
        if not self._meaning or not text:
            return []
        budget = EVENTS_FLOOR + int(len(text) * EVENTS_PER_CHARACTER)
        events = _Events(budget)
        data = one_byte_per_character(text)
        # A dense text stops the scan from its callback: Hyperscan then raises.
        with suppress(hyperscan.ScanTerminated):
            self._database.scan(
                data, match_event_handler=events, scratch=self._scratch(self._database)
            )
        if events.dense is not None:
            return [(self._meaning[events.dense].rule, (0, len(text)))]
        reaches: dict[int, list[Span]] = {}
        for index, ends in events.by_rule(self._meaning).items():
            reaches[index] = _starts(ends, _lead(self.ruleset.rules[index]))
            if sum(high - low for low, high in reaches[index]) > CONFIRM_CHARACTERS:
                return [(index, (0, len(text)))]
        reversible = [span for n in self._reversible if n in reaches for span in reaches[n]]
        starts, dense = self._match_starts(data, reversible, budget) if reversible else ({}, None)
        if dense is not None:
            return [(dense, (0, len(text)))]
        found: list[tuple[int, Span]] = []
        # Rules with one head and one set of keywords have one reach: one search for all.
        headed: dict[tuple[re.Pattern[str], tuple[str, ...]], list[int]] = {}
        for index, reach in reaches.items():
            rule, pattern = self.ruleset.rules[index], self.ruleset.compiled[index]
            if not _by_keywords(rule):
                spans = at_starts(rule, pattern, text, starts.get(index, ()))
            elif index in self._heads:
                search, width = self._heads[index]
                shared = (search, rule.keywords)
                if shared not in headed:
                    headed[shared] = head_starts(search, width, text, reach)
                spans = at_starts(rule, pattern, text, headed[shared])
            else:
                spans = windows(rule, pattern, text, reach)
            found += [(index, span) for span in spans]
        return found


def _merged(spans: Iterable[Span]) -> list[Span]:
    """`spans`, sorted by their start, with those that overlap or touch made one."""
    merged: list[Span] = []
    for low, high in spans:
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def _lead(rule: Rule) -> int:
    """How far before a reported end a match of `rule` may start: its reach, or for a rule
    found by its keywords, how far before a keyword (its `lead` when it has one)."""
    if rule.lead is not None and _by_keywords(rule):
        return rule.lead
    return rule.max_length


def _starts(ends: list[int], reach: int) -> list[Span]:
    """Where matches ending (or a keyword ending) at `ends` may start: merged, in order.

    One character of slack on each side costs nothing: from a start where no
    match begins, `re` finds nothing.
    """
    merged: list[Span] = []
    low, high = 0, -2
    for end in sorted(ends):
        if end - reach - 1 > high + 1:
            if high >= 0:
                merged.append((low, high))
            low = max(0, end - reach - 1)
        high = end
    if high >= 0:
        merged.append((low, high))
    return merged
