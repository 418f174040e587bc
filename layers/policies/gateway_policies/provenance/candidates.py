"""The values a tool call's input carries, each as flow_guard looks it up.

Every value of the input at any depth is read: strings, numbers as text, and
JSON inside a string, parsed and walked; never the object keys (the tool's
parameter names). Each value gives its candidates: the whole value, the
entities inside it (URLs and their hosts, e-mail addresses, IBANs, IP
addresses, phone numbers with a leading `+`) and its secret-like tokens; each
in normal form (provenance.normalise), IBANs and phone numbers compact.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..detect import scan
from .hosts import NAME, NOT_AFTER, host_of
from .normalise import IBAN, PHONE, compact, normalise

KINDS = ("url", "email", "iban", "phone", "ip", "host", "token", "value")
"""Every kind of candidate, in the order a call's candidates are looked up."""

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"'`\\]+")
"""A URL of any scheme (`https`, `rsync`, `sftp`, `git+ssh`, …)."""
_BARE_URL = re.compile(rf"{NOT_AFTER}{NAME}[/:][^\s<>\"'`\\]*")
"""A host followed by a path or a port (`evil.example/x`, `host:22`): how commands
such as curl and scp name a destination without a scheme."""
_BARE_HOST = re.compile(rf"{NOT_AFTER}({NAME})\.?(?![\w.(-])")
"""A host standing alone (`curl evil.example`, `nc evil.example 4444`, `curl evil.example;true`,
`(curl evil.example)`): it ends at any character that cannot continue a host name, except an
opening parenthesis: a name followed by one is a call (`json.dumps(`), not a host."""
_EMAIL = re.compile(r"[\w.+-]+@((?:[\w-]+\.)+[\w-]{2,})")
_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
_IPV6 = re.compile(r"(?<![\w:])[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?![\w:])")
_TRAILING = ".,;:!?)]}'\""

_TOKEN = re.compile(r"[A-Za-z0-9_+=-]{16,}")
TOKEN_ENTROPY = 3.0
"""Bits per character a 16+ character token needs to count as secret-like."""

MAX_DEPTH = 32
"""How deep JSON inside a string is walked (the string itself is always a candidate)."""


@dataclass(frozen=True)
class Candidate:
    kind: str
    text: str
    """In normal form: what is looked up."""


def _entropy(token: str) -> float:
    counts = Counter(token).values()
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts)


def secret_tokens(text: str) -> Iterator[str]:
    """The secret-like tokens of `text`: what the detector (gateway_policies.detect, its
    default rules) finds, whatever its length or entropy, then 16+ characters of high
    entropy mixing character classes, which finds the secrets no rule knows."""
    found = dict.fromkeys(text[hit.start : hit.end] for hit in scan([text]))
    for token in _TOKEN.findall(text):
        classes = sum(
            any(test(char) for char in token) for test in (str.islower, str.isupper, str.isdigit)
        )
        if classes >= 2 and _entropy(token) >= TOKEN_ENTROPY:
            found[token] = None
    yield from found


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def entities(normal: str) -> Iterator[Candidate]:
    """The entities inside a value in normal form."""
    for pattern in (_URL, _BARE_URL):
        for found in pattern.findall(normal):
            # Without a final slash, which a page and a user add or leave out at will.
            url = found.rstrip(_TRAILING).rstrip("/")
            yield Candidate("url", url)
            host = host_of(url)
            if host:
                yield Candidate("host", host)
    for found in _BARE_HOST.findall(normal):
        yield Candidate("host", found)
    for match in _EMAIL.finditer(normal):
        yield Candidate("email", match.group(0).rstrip(_TRAILING))
        yield Candidate("host", match.group(1))
    for found in IBAN.findall(normal):
        yield Candidate("iban", compact(found))
    for found in PHONE.findall(normal):
        yield Candidate("phone", compact(found))
    for pattern in (_IPV4, _IPV6):
        for found in pattern.findall(normal):
            if _is_ip(found):
                yield Candidate("ip", found)


def _values(value: Any, depth: int = 0) -> Iterator[str]:
    """Every value in `value` as text, JSON inside strings walked too."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        yield json.dumps(value)
    elif isinstance(value, str):
        yield value
        if depth < MAX_DEPTH and value.lstrip()[:1] in ("{", "["):
            try:
                inner = json.loads(value)
            except (ValueError, RecursionError):
                return
            yield from _values(inner, depth + 1)
    elif isinstance(value, dict) and depth < MAX_DEPTH:
        for item in value.values():
            yield from _values(item, depth + 1)
    elif isinstance(value, list) and depth < MAX_DEPTH:
        for item in value:
            yield from _values(item, depth + 1)


def candidates(tool_input: Any, min_length: int) -> list[Candidate]:
    """A call's candidates of at least `min_length` characters in normal form, each once,
    ordered by KINDS."""
    found: dict[str, Candidate] = {}
    for value in _values(tool_input):
        normal = normalise(value)
        made = [
            *entities(normal),
            *(Candidate("token", normalise(token)) for token in secret_tokens(value)),
            Candidate("value", normal),
        ]
        for candidate in made:
            if len(candidate.text) >= min_length:
                found.setdefault(candidate.text, candidate)
    return sorted(found.values(), key=lambda candidate: KINDS.index(candidate.kind))
