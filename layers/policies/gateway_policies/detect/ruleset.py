"""A rule set: the rules one scan applies, compiled for `re`, and the version that names them.

The version is a digest of everything that decides a rule's matches (its kind,
pattern, reach, case and validator's name), so a changed rule is a new version:
it is part of each policy document's `chain_version` and of every memo key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from .rule import Rule


def _flags(rule: Rule) -> int:
    # ASCII: `\w`, `\b`, `\s` and case folding as Hyperscan has them.
    return re.ASCII | (re.IGNORECASE if rule.ignore_case else 0)


@dataclass(frozen=True)
class RuleSet:
    """Rules in catalogue order; one kind may have several (a Kubernetes secret as YAML
    or as JSON), each reported under its kind."""

    rules: tuple[Rule, ...]

    @cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(rule.pattern, _flags(rule)) for rule in self.rules)

    @classmethod
    def of(cls, rules: Iterable[Rule], kinds: Iterable[str] | None = None) -> RuleSet:
        """The rules named by `kinds` (catalogue order), or the default-on ones when None."""
        if kinds is None:
            return cls(tuple(rule for rule in rules if rule.default_on))
        wanted = frozenset(kinds)
        return cls(tuple(rule for rule in rules if rule.kind in wanted))

    @cached_property
    def version(self) -> str:
        described = [
            [
                rule.kind,
                rule.pattern,
                rule.max_length,
                rule.ignore_case,
                getattr(rule.validator, "__qualname__", None),
            ]
            for rule in self.rules
        ]
        return hashlib.sha256(repr(described).encode()).hexdigest()[:12]
