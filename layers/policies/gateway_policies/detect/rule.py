"""One detection rule: a family of secret or personal data, as the detector's engines see it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    kind: str
    """Stable snake_case family name: the `[REDACTED:<kind>]` label and the `kinds` option's
    value."""
    pattern: str
    """A regex valid for both Python `re` and Hyperscan: no lookarounds, no backreferences, no
    atomic or possessive groups, every repetition bounded. A named group `secret` marks the part
    to redact; without it the whole match is redacted."""
    max_length: int
    """The longest text the pattern can match, in characters: the confirm window."""
    keywords: tuple[str, ...] = ()
    """Literal, lower-case strings one of which every match contains (for a prefilter); empty
    when the rule has no literal."""
    lead: int | None = None
    """At most how many characters of a match come before its keyword, when that is known
    (`"auth": "…"` starts at its keyword): the rule is then found by its keywords whatever its
    reach, and confirmed from just before each keyword on, not over its whole reach before it
    (None)."""
    head: str | None = None
    """For a rule with a `lead`, the part of `pattern` every match begins with when the rules
    of one family differ only after it (a command and its option, then each way its value may be
    written): the engine finds where the head matches once for all of them and tries each rule
    only there. None: the whole pattern is its own head."""
    validator: Callable[[str], bool] | None = None
    """Checks the `secret` text (a checksum, entropy, a valid area): False drops the match."""
    ignore_case: bool = False
    default_on: bool = True
    """False for the opt-in PII kinds (payment_card, iban, us_ssn, phone)."""
