"""The one form in which flow_guard compares a value with the text it may come from.

A value copied from a page reaches a tool call in many spellings: escaped for
JSON, percent-encoded in a URL, with HTML entities, in another case, with
zero-width characters slipped in, spaced differently. Each text and each
value is brought to one form: JSON escapes, HTML entities and percent-escapes
decoded (once each, in that order), Unicode NFKC, format characters (and NUL)
removed, case folded, runs of whitespace collapsed to one space.

An IBAN or a phone number is often written with spaces or dashes in one place
and without in another: `searchable` appends, after a text's normal form, the
compact form of each one written with separators, so a compact value is found
whatever the text's spelling.
"""

from __future__ import annotations

import html
import re
import threading
import unicodedata
from urllib.parse import unquote

_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_JSON_SIMPLE = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}

FORMAT_CHARS = re.compile(
    "[\x00\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]+"
)
"""Every Unicode format character (category Cf, Unicode 15.1), and NUL: invisible,
so a value with one slipped in reads the same to a model and a person."""

_WHITESPACE = re.compile(r"\s+")

IBAN = re.compile(r"\b[a-z]{2}\d{2}(?:[ -]?[a-z0-9]{4}){2,7}(?:[ -]?[a-z0-9]{1,4})?\b")
"""An IBAN in normal form (lower case), compact or in groups of four."""
PHONE = re.compile(r"\+\d(?:[ ().-]{0,2}\d){6,14}\b")
"""A phone number with its leading `+`, digits grouped as people write them."""


def _json_unescaped(match: re.Match[str]) -> str:
    code, simple = match.groups()
    return chr(int(code, 16)) if code else _JSON_SIMPLE[simple]


def normalise(text: str) -> str:
    """`text` in the form every comparison uses (the module's docstring says which)."""
    if "\\" in text:
        text = _JSON_ESCAPE.sub(_json_unescaped, text)
    text = unquote(html.unescape(text))
    text = FORMAT_CHARS.sub("", unicodedata.normalize("NFKC", text)).casefold()
    return _WHITESPACE.sub(" ", text).strip()


def compact(entity: str) -> str:
    """An IBAN or a phone number without its separators."""
    return "".join(char for char in entity if char.isalnum() or char == "+")


def _compact_forms(normal: str) -> list[str]:
    return [
        compact(found)
        for pattern in (IBAN, PHONE)
        for found in pattern.findall(normal)
        if compact(found) != found
    ]


def searchable(text: str) -> str:
    """`normalise(text)`, then the compact form of each IBAN or phone number it spaces out."""
    normal = normalise(text)
    extra = _compact_forms(normal)
    return f"{normal}\n{' '.join(extra)}" if extra else normal


MEMO_CHARS = 8 << 20
"""How many characters (texts and their forms) the memo keeps before it starts afresh."""


class SearchableMemo:
    """`searchable`, remembered per text: each turn of a session resends the same results.

    Keyed by the text itself (a dict compares the whole text, so no crafted
    collision exists); bounded by MEMO_CHARS, emptied when full. Shared by the
    calls one policy instance serves, across threads: a lost entry only costs
    its recomputation.
    """

    def __init__(self, limit: int = MEMO_CHARS) -> None:
        self._limit = limit
        self._known: dict[str, str] = {}
        self._size = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        found = self._known.get(text)
        if found is not None:
            return found
        made = searchable(text)
        cost = len(text) + len(made)
        with self._lock:
            if self._size + cost > self._limit:
                self._known.clear()
                self._size = 0
            if cost <= self._limit:
                self._known[text] = made
                self._size += cost
        return made
