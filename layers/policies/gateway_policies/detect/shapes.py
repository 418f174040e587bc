"""How a rule's pattern is built from a family's documented shape, so every rule ends the same way.

A token is its `secret` between two characters outside its alphabet (or the text's edge, or a
JSON escape such as a literal `\\n` before it). The boundary on each side makes a token a maximal
run of its alphabet: the engine reports at most one end per run, however the text is crafted
(`xoxb-xoxb-…` or `AKIAAKIA…` is one long run that matches nowhere, not a match per prefix).
A labelled value (`password=…`, `COHERE_API_KEY: …`) is a label, a separator and a value that ends
at a delimiter; the value's alphabet and the delimiters share no character, so a label has one
value and one end.

Everything is ASCII and spelled out (`[ \\t]`, not `\\s`; `[0-9]`, not `\\d`): Hyperscan reads
bytes, Python's `re` reads Unicode, and explicit classes mean the same in both.
"""

from __future__ import annotations

from collections.abc import Callable

from .rule import Rule
from .validators import labelled_secret, plausible_token

TOKEN_ALPHABET = "A-Za-z0-9_-"
"""The characters most issued tokens are made of (base62 plus `_` and `-`)."""
URL_USERINFO = r"[A-Za-z0-9._~%!$&*+,;=-]"
"""A character of a URL's `user:password` (RFC 3986's unreserved, sub-delims and `%`)."""

ESCAPE = r"\\[nrt]"
"""A JSON escape written out, as a tool's JSON output shows a newline or a tab before a key."""

Validator = Callable[[str], bool]


def left(alphabet: str) -> str:
    """Start of the text, a character outside the alphabet, or a written-out JSON escape."""
    return rf"(?:^|[^{alphabet}]|{ESCAPE})"


def right(alphabet: str) -> str:
    """End of the text or a character outside the alphabet."""
    return rf"(?:[^{alphabet}]|$)"


def token(
    kind: str,
    secret: str,
    width: int,
    keywords: tuple[str, ...],
    *,
    alphabet: str = TOKEN_ALPHABET,
    validator: Validator | None = plausible_token,
) -> Rule:
    """A prefixed token: `secret` (a regex of at most `width` characters) between boundaries.

    The left boundary is the same for every token (a token's prefix is a word, so a word or a
    dash before it is what must not be there); the right one is the token's own alphabet, as
    `=`, `.` or `/` may end or continue a token (`SG.…`, base64 padding)."""
    return Rule(
        kind=kind,
        pattern=f"{left(TOKEN_ALPHABET)}(?P<secret>{secret}){right(alphabet)}",
        max_length=2 + width + 1,
        keywords=keywords,
        validator=validator,
    )


LABEL_TAIL = 24
"""Identifier characters allowed between a label's keyword and its separator (`password_prod`)."""

_SEPARATOR = r"(?:\\?[\"'])?[ \t]{0,4}(?::=|=>|[:=])[ \t]{0,4}(?:\\?[\"'`])?"
_SEPARATOR_WIDTH = 2 + 4 + 2 + 4 + 2


def labelled(
    kind: str,
    label: str,
    label_width: int,
    value: str,
    value_width: int,
    keywords: tuple[str, ...],
    *,
    delimiters: str = r"\"'`\\ \t\r\n,;(){}<>\[\]",
    validator: Validator | None = labelled_secret,
    tail: bool = True,
) -> Rule:
    """A value after a label in .env, YAML, JSON, shell or code: `LABEL=v`, `label: "v"`,
    `"label": "v"`, `export LABEL='v'`, `label := v`. `label` is matched without case and,
    with `tail`, may be followed by identifier characters (`password_hash`, `API_KEY_PROD`);
    without, `label` spells its own end (segments). `value` must end at one of `delimiters`,
    none of which it may contain."""
    rest = f"[A-Za-z0-9_.-]{{0,{LABEL_TAIL}}}" if tail else ""
    return Rule(
        kind=kind,
        pattern=f"{label}{rest}{_SEPARATOR}(?P<secret>{value})(?:[{delimiters}]|$)",
        max_length=label_width + LABEL_TAIL + _SEPARATOR_WIDTH + value_width + 1,
        keywords=keywords,
        validator=validator,
        ignore_case=True,
    )


def segment(words: tuple[str, ...], *, last: bool = False) -> tuple[str, int]:
    """A label one of whose segments (split at `_`, `-`, `.` and a change of case) is one of
    `words` (the `last` one with `last`), and the label's widest match: `DB_PASS`, `smtp-pass`,
    `dbPass`, `PASS_PROD`, never `bypass`, `passenger` or `PASSPORT`. A short word needs the
    segment's edges, where a long one (`password`) is a label wherever it stands."""
    lower = "|".join(words)
    title = "|".join(word.title() for word in words)
    edge = left("A-Za-z0-9")
    rest = f"[A-Za-z0-9_.-]{{0,{LABEL_TAIL - 1}}}"
    # What may follow the word in its identifier: a new segment (a separator, a digit, or an
    # upper-case letter after a lower-case word), or nothing when the word ends the label.
    camel, caps = ("", "") if last else (f"(?:[A-Z0-9_.-]{rest})?", f"(?:[0-9_.-]{rest})?")
    label = f"(?-i:{edge}(?:{lower}){camel}|{edge}(?:{lower.upper()}){caps}|(?:{title}){camel})"
    return label, 2 + max(map(len, words)) + LABEL_TAIL


def hex_run(length: int) -> str:
    return f"[a-f0-9]{{{length}}}"


UUID = "[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"
UUID_WIDTH = 36
