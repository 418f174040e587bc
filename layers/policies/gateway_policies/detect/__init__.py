"""The detector: where secrets and personal data sit in a request's texts.

A pure, versioned contract that redact_secrets uses and other readers of
request text (flow_guard, the fallback record, the audit) can share:

    scan(texts, kinds=None) -> [Hit(slot, start, end, kind), ...]

`slot` indexes `texts`; `start`/`end` are indices into that Python string
(decoded text, never raw JSON bytes); `kind` is the rule's family. Hits come
in slot order, each slot's by rule (catalogue order) then start; hits of
different kinds may overlap. `kinds=None` means every default-on rule. A
`CONTRACT` change means the meaning of a hit changed; a rule set's `version`
changes with any rule.

One engine per process and rule set (`detector`), compiled on first use (the
gateway's init, before a SnapStart snapshot, when its chain loads) and
reused by every chain that selects the same rules; Hyperscan is imported only
then.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from functools import cache
from typing import NamedTuple, Protocol

from .confirm import Span
from .rule import Rule
from .rules import RULES
from .ruleset import RuleSet

CONTRACT = 1


class Hit(NamedTuple):
    slot: int
    start: int
    end: int
    kind: str


class Engine(Protocol):
    ruleset: RuleSet

    def find(self, text: str) -> list[tuple[int, Span]]: ...


class Detector:
    """A rule set and the engine that runs it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ruleset = engine.ruleset
        self.version = engine.ruleset.version
        self.kinds = tuple(rule.kind for rule in engine.ruleset.rules)

    def find(self, text: str) -> list[tuple[str, Span]]:
        """(kind, span) of each match in one text."""
        rules = self.ruleset.rules
        return [(rules[index].kind, span) for index, span in self.engine.find(text)]

    def scan(self, texts: Sequence[str]) -> list[Hit]:
        return [
            Hit(slot, start, end, kind)
            for slot, text in enumerate(texts)
            for kind, (start, end) in self.find(text)
        ]


_lock = threading.Lock()
_detectors: dict[tuple[str, ...], Detector] = {}
_asked: dict[tuple[str, ...] | None, Detector] = {}


def catalogue() -> tuple[Rule, ...]:
    return RULES


@cache
def catalogue_version() -> str:
    """The version of every rule the catalogue has: part of each policy document's version."""
    return RuleSet(RULES).version


def detector(kinds: Iterable[str] | None = None) -> Detector:
    """The process's Hyperscan detector for `kinds` (default-on rules when None), compiled once."""
    asked = None if kinds is None else tuple(kinds)
    # Found by the kinds as asked first: building the rule set costs 16 us, and flow_guard
    # asks for the default detector once per string value of a request.
    found = _asked.get(asked)
    if found is not None:
        return found
    ruleset = RuleSet.of(RULES, asked)
    key = tuple(rule.kind for rule in ruleset.rules)
    with _lock:
        found = _detectors.get(key)
        if found is None:
            from .engine import HyperscanEngine

            found = _detectors[key] = Detector(HyperscanEngine(ruleset))
        _asked[asked] = found
        return found


def scan(texts: Sequence[str], kinds: Iterable[str] | None = None) -> list[Hit]:
    return detector(kinds).scan(texts)


__all__ = [
    "CONTRACT",
    "Detector",
    "Hit",
    "Rule",
    "catalogue",
    "catalogue_version",
    "detector",
    "scan",
]
