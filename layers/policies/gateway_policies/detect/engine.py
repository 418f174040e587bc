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
from there, however long its value: an ECR login's runs to thousands).

The text Hyperscan reads has one byte per character, so an index is the same
in both: ASCII as is, every other character as one non-ASCII byte. A rule
compiled with `re.ASCII` treats any such character exactly as Hyperscan treats
that byte (no class, no word character, no case), so Hyperscan's ends are
those `re` would find.

Bounded work: a text where one rule ends too often (a crafted body of near
matches) stops the scan, and the whole text is that rule's match: a linear
whole-value redaction instead of millions of confirmations.
"""

from __future__ import annotations

import codecs
import threading
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import hyperscan

from .confirm import Span, anchored, windows
from .rule import Rule
from .ruleset import RuleSet

LONG_REACH = 1024
"""Rules reaching further than this are found by their keywords (see the module's docstring)."""

EVENTS_FLOOR = 4096
EVENTS_PER_CHARACTER = 1 / 16
"""How many ends one text may report, over all rules, before it counts as dense."""

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


def _expressions(rules: tuple[Rule, ...]) -> tuple[list[bytes], list[int], list[_Expression]]:
    sources: list[bytes] = []
    flags: list[int] = []
    meaning: list[_Expression] = []
    for index, rule in enumerate(rules):
        if rule.max_length > LONG_REACH and rule.keywords:
            for keyword in rule.keywords:
                sources.append(_literal(keyword))
                flags.append(hyperscan.HS_FLAG_CASELESS)
                meaning.append(_Expression(index, len(keyword)))
        else:
            sources.append(rule.pattern.replace("(?P<secret>", "(").encode())
            flags.append(hyperscan.HS_FLAG_CASELESS if rule.ignore_case else 0)
            meaning.append(_Expression(index, 0))
    return sources, flags, meaning


class _Events:
    """One scan's match ends, by rule, until there are too many."""

    def __init__(self, meaning: list[_Expression], budget: int) -> None:
        self.meaning = meaning
        self.ends: dict[int, list[int]] = defaultdict(list)
        self.left = budget
        self.dense: int | None = None

    def __call__(self, expression: int, start: int, end: int, flags: int, context: Any) -> bool:
        what = self.meaning[expression]
        self.ends[what.rule].append(end - what.keyword if what.keyword else end)
        self.left -= 1
        if self.left < 0:
            self.dense = what.rule
            return True
        return False


class HyperscanEngine:
    """One compiled database per rule set, one scratch space per thread."""

    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset
        sources, flags, self._meaning = _expressions(ruleset.rules)
        self._database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        if sources:
            self._database.compile(
                expressions=sources,
                ids=list(range(len(sources))),
                elements=len(sources),
                flags=flags,
            )
        self._local = threading.local()

    def _scratch(self) -> hyperscan.Scratch:
        scratch: hyperscan.Scratch | None = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._database)
        return scratch

    def find(self, text: str) -> list[tuple[int, Span]]:
        """(rule index, span) of every match in `text`, by rule, each rule's in order."""
        if not self._meaning or not text:
            return []
        events = _Events(self._meaning, EVENTS_FLOOR + int(len(text) * EVENTS_PER_CHARACTER))
        # A dense text stops the scan from its callback: Hyperscan then raises.
        with suppress(hyperscan.ScanTerminated):
            self._database.scan(
                one_byte_per_character(text), match_event_handler=events, scratch=self._scratch()
            )
        if events.dense is not None:
            return [(events.dense, (0, len(text)))]
        found: list[tuple[int, Span]] = []
        for index, ends in sorted(events.ends.items()):
            rule = self.ruleset.rules[index]
            starts = _starts(ends, _lead(rule))
            if sum(high - low for low, high in starts) > CONFIRM_CHARACTERS:
                return [(index, (0, len(text)))]
            pattern = self.ruleset.compiled[index]
            confirm = anchored if _lead(rule) != rule.max_length else windows
            found += [(index, span) for span in confirm(rule, pattern, text, starts)]
        return found


def _lead(rule: Rule) -> int:
    """How far before a reported end a match of `rule` may start: its reach, or for a rule
    found by its keywords, how far before a keyword (its `lead` when it has one)."""
    if rule.lead is not None and rule.max_length > LONG_REACH and rule.keywords:
        return rule.lead
    return rule.max_length


def _starts(ends: list[int], reach: int) -> list[Span]:
    """Where matches ending (or a keyword ending) at `ends` may start: merged, in order.

    One character of slack on each side costs nothing: from a start where no
    match begins, `re` finds nothing.
    """
    merged: list[Span] = []
    for end in sorted(ends):
        low, high = max(0, end - reach - 1), end
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged
