"""Where each value of a JSON document lies in its text, so a record keeps the exact bytes.

A record must hold every message byte for byte as it went upstream (a thinking
block's signature is checked against its bytes; an operator comparing a record
with an upstream's log must see the same text). Re-serializing a parsed message
would not do that, so the writer cuts each value out of the body it sent, and the
reader cuts it out of the record again. The cuts are found with the C decoder
(`raw_decode` from each value's start), so a megabyte body costs one parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


class NotAnObject(ValueError):
    """The text is not one JSON object."""


@dataclass(frozen=True)
class Member:
    """One top-level member of an object: its key, its parsed value, and its text."""

    key: str
    value: Any
    text: str
    items: tuple[str, ...] | None
    """The text of each element when the value is an array, else None."""


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def members(text: str, arrays: frozenset[str] = frozenset()) -> list[Member]:
    """The top-level members of the JSON object `text`, in order; for keys in `arrays`
    whose value is an array, the text of each element too.

    Raises NotAnObject when `text` is not exactly one JSON object.
    """
    at = _skip(text, 0)
    if not text.startswith("{", at):
        raise NotAnObject("not a JSON object")
    at = _skip(text, at + 1)
    found: list[Member] = []
    if text.startswith("}", at):
        return _end(text, at + 1, found)
    while True:
        try:
            key, at = _DECODER.raw_decode(text, at)
        except ValueError as exc:
            raise NotAnObject(str(exc)) from None
        if not isinstance(key, str):
            raise NotAnObject("a key is not a string")
        at = _skip(text, at)
        if not text.startswith(":", at):
            raise NotAnObject("a key without a value")
        start = _skip(text, at + 1)
        items: tuple[str, ...] | None = None
        if key in arrays and text.startswith("[", start):
            items, at = _elements(text, start)
            value: Any = None
        else:
            try:
                value, at = _DECODER.raw_decode(text, start)
            except ValueError as exc:
                raise NotAnObject(str(exc)) from None
        found.append(Member(key, value, text[start:at], items))
        at = _skip(text, at)
        if text.startswith(",", at):
            at = _skip(text, at + 1)
            continue
        if text.startswith("}", at):
            return _end(text, at + 1, found)
        raise NotAnObject("members not separated by commas")


def _elements(text: str, start: int) -> tuple[tuple[str, ...], int]:
    at = _skip(text, start + 1)
    items: list[str] = []
    if text.startswith("]", at):
        return (), at + 1
    while True:
        try:
            _, end = _DECODER.raw_decode(text, at)
        except ValueError as exc:
            raise NotAnObject(str(exc)) from None
        items.append(text[at:end])
        at = _skip(text, end)
        if text.startswith(",", at):
            at = _skip(text, at + 1)
            continue
        if text.startswith("]", at):
            return tuple(items), at + 1
        raise NotAnObject("array elements not separated by commas")


def _end(text: str, at: int, found: list[Member]) -> list[Member]:
    if _skip(text, at) != len(text):
        raise NotAnObject("text after the object")
    return found
