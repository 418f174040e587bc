"""The reference engine: each rule's `re.finditer` over the whole text, one rule at a time.

Not linear in general and not used to serve: it is what the Hyperscan engine
must agree with (tests/test_detect.py), and the plainest statement of what a
rule set finds.
"""

from __future__ import annotations

from .confirm import Span, everywhere
from .ruleset import RuleSet


class ReferenceEngine:
    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset

    def find(self, text: str) -> list[tuple[int, Span]]:
        return [
            (index, span)
            for index, rule in enumerate(self.ruleset.rules)
            for span in everywhere(rule, self.ruleset.compiled[index], text)
        ]
