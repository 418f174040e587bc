"""A plain `re` scan of detection rules: what any engine running them must find.

Each search resumes where the last secret ended, so a delimiter a match consumed can start the
next one (`AKIA…,AKIA…`); a match is kept when its rule's validator accepts its `secret` text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from gateway_policies.detect.rule import Rule
from gateway_policies.detect.rules import RULES

Finding = tuple[int, int, str]


@cache
def compiled(rule: Rule) -> re.Pattern[str]:
    return re.compile(rule.pattern, re.IGNORECASE if rule.ignore_case else 0)


def scan(text: str, rules: Iterable[Rule] = RULES) -> list[Finding]:
    """Every (start, end, kind) of a validated `secret` span, rule by rule."""
    found = []
    for rule in rules:
        pattern = compiled(rule)
        group = "secret" if "secret" in pattern.groupindex else 0
        position = 0
        while (match := pattern.search(text, position)) is not None:
            start, end = match.span(group)
            if rule.validator is None or rule.validator(match.group(group)):
                found.append((start, end, rule.kind))
            position = max(end, match.start() + 1)
    return found


def prefiltered(text: str, rules: Iterable[Rule] = RULES) -> list[Finding]:
    """`scan` of only the rules one of whose keywords the text holds (or that have none)."""
    folded = text.lower()
    return scan(text, [r for r in rules if not r.keywords or any(k in folded for k in r.keywords)])
