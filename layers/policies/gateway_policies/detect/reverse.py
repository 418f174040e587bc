"""A rule's pattern read right to left, so that Hyperscan can say where matches start.

Hyperscan reports where matches end. Scanned over a text reversed, the reversed
pattern reports, at each of its own ends, a start of a match of the rule: every
position `re` has to try, and no other. Without it, `re` tries every position
of a window as long as the rule's reach before each end, and a text of partial
matches around real ones (`a…a@b-b-b-` then an address, over and over) makes
each of those tries walk the partial match again.

A rule's pattern uses only what both engines read (rule.Rule): literals,
classes, bounded repetitions, alternations, groups with an inline case flag,
`^`, `$` and `\\b`. Reversed, a sequence runs backwards, `^` becomes the end of
the reversed text and `$` its start (before which the text's final newline may
stand), `\\b` stays itself; laziness is dropped, as only where a match may start
counts.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

# The parser `re` itself uses (what `sre_parse` was; that name now warns when imported).
_parse: Any = importlib.import_module("re._parser")
_sre: Any = importlib.import_module("re._constants")

_CATEGORIES = {
    _sre.CATEGORY_DIGIT: r"\d",
    _sre.CATEGORY_NOT_DIGIT: r"\D",
    _sre.CATEGORY_SPACE: r"\s",
    _sre.CATEGORY_NOT_SPACE: r"\S",
    _sre.CATEGORY_WORD: r"\w",
    _sre.CATEGORY_NOT_WORD: r"\W",
}
_ANCHORS = {
    _sre.AT_BEGINNING: "$",
    _sre.AT_BEGINNING_STRING: "$",
    _sre.AT_END: "^\\n?",
    _sre.AT_END_STRING: "^",
    _sre.AT_BOUNDARY: r"\b",
    _sre.AT_NON_BOUNDARY: r"\B",
}


class Unreversible(ValueError):
    """A construct a rule's pattern may not hold (rule.Rule says which it may)."""


def _char(code: int) -> str:
    char = chr(code)
    if char.isascii() and char.isalnum():
        return char
    if code > 0xFF:
        raise Unreversible("a character outside Latin-1")
    return f"\\x{code:02x}"


def _set(items: Any) -> str:
    negate = ""
    parts: list[str] = []
    for op, value in items:
        if op is _sre.NEGATE:
            negate = "^"
        elif op is _sre.LITERAL:
            parts.append(_char(value))
        elif op is _sre.RANGE:
            parts.append(f"{_char(value[0])}-{_char(value[1])}")
        elif op is _sre.CATEGORY:
            parts.append(_CATEGORIES[value])
        else:
            raise Unreversible(f"{op} in a class")
    return f"[{negate}{''.join(parts)}]"


def _repeat(low: int, high: int) -> str:
    if high is _sre.MAXREPEAT:
        return f"{{{low},}}"
    return f"{{{low},{high}}}"


def _reversed(items: Any) -> str:
    out: list[str] = []
    for op, value in reversed(list(items)):
        if op is _sre.LITERAL:
            out.append(_char(value))
        elif op is _sre.NOT_LITERAL:
            out.append(f"[^{_char(value)}]")
        elif op is _sre.IN:
            out.append(_set(value))
        elif op is _sre.ANY:
            out.append(".")
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            low, high, inner = value
            out.append(f"(?:{_reversed(inner)}){_repeat(low, high)}")
        elif op is _sre.BRANCH:
            out.append("(?:" + "|".join(_reversed(branch) for branch in value[1]) + ")")
        elif op is _sre.SUBPATTERN:
            _, add, remove, inner = value
            if (add | remove) & ~re.IGNORECASE:
                raise Unreversible("an inline flag other than (?i: and (?-i:")
            flags = "i" if add else "-i" if remove else ""
            out.append(f"(?{flags}:{_reversed(inner)})")
        elif op is _sre.AT:
            out.append(_ANCHORS[value])
        else:
            raise Unreversible(str(op))
    return "".join(out)


def reversed_pattern(pattern: str) -> str:
    """`pattern` read right to left: it matches a text reversed exactly where `pattern` matches
    the text (anchors and `\\b` read at the reversed text's edges as at the text's)."""
    return _reversed(_parse.parse(pattern, 0))
