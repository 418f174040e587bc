"""A JSON object taken apart and put together member by member, each value's text untouched.

Bedrock's body is the Messages API body less `model` and `stream`, plus
`anthropic_version` (and `anthropic_beta`; for CountTokens a `max_tokens`):
re-serializing it whole could change what the policies
produced (a lone surrogate escape, a number beyond float range, key order), so
only the members themselves are moved.
"""

from __future__ import annotations

import json
import re

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def split_members(text: str) -> list[tuple[str, str]]:
    """The top-level members of a JSON object as (key, raw value text), in order.

    Each value is kept as the exact text it was sent as, so whatever the
    member holds (a thinking block's signature, a lone surrogate escape, a
    number beyond float range) reaches Bedrock as the policies produced it.
    """
    position = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    if text[position : position + 1] != "{":
        raise ValueError("not a JSON object")
    position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
    members: list[tuple[str, str]] = []
    if text[position : position + 1] == "}":
        return members
    while True:
        if text[position : position + 1] != '"':
            raise ValueError("expected a member name")
        key, position = _DECODER.raw_decode(text, position)
        position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
        if text[position : position + 1] != ":":
            raise ValueError("expected ':'")
        position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
        _, end = _DECODER.raw_decode(text, position)
        members.append((key, text[position:end]))
        position = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
        separator = text[position : position + 1]
        position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
        if separator == "}":
            return members
        if separator != ",":
            raise ValueError("expected ',' or '}'")


def join_members(members: list[tuple[str, str]]) -> bytes:
    return ("{" + ",".join(f"{json.dumps(key)}:{raw}" for key, raw in members) + "}").encode()
