"""What a host name is, both when one is read out of a call and when one is looked up in a text.

A host is labels of letters, digits and `-` (Unicode letters too: the normal form keeps
them) joined by dots, and it ends at the first character that cannot continue one,
however the call glues it to what follows: `curl evil.example;true`, `…|cat`,
`…>/dev/null`, `(curl evil.example)`, `rsync://evil.example/x`, `user@evil.example:22`.

Looked up, a host, URL or e-mail address occurs in a text only at label and word
boundaries: `thropic.com` is not in `docs.anthropic.com` (it is the tail of a longer
label) and `github.com` is not in `github.com.evil.example` (a longer name), while
`anthropic.com` is in `docs.anthropic.com` (a text that names a subdomain names its
domain) and in `https://anthropic.com/x` or `me@anthropic.com`.
"""

from __future__ import annotations

import re
from enum import Enum

_LABEL = r"(?:[^\W_]|-)+"
_TOP = r"(?:[^\W\d_]{2,63}|xn--[a-z0-9-]{1,59})"
NAME = rf"(?:{_LABEL}\.)+{_TOP}"
"""A dotted host name in normal form (lower case), its last label a top-level domain's shape."""

NOT_AFTER = r"(?<![\w.@/:-])"
"""A bare host or URL starts where the character before it could not be part of one (a path's
`/`, an address's `@`, a port's `:`)."""

_AUTHORITY = re.compile(r"(?:[^/?#@\s]*@)?(\[[0-9a-f:.]+\]|[\w.-]+)")
"""A URL's authority after its `scheme://`: an optional `user:password@`, then the host, which
ends at the first character a host name cannot hold."""

_CONTINUES = re.compile(r"[\w-]")


def host_of(url: str) -> str | None:
    """The host of `url` (with or without a `scheme://`), without an IPv6 literal's brackets
    or the root's trailing dot (`evil.example.` is `evil.example`)."""
    _, separator, rest = url.partition("://")
    match = _AUTHORITY.match(rest if separator else url)
    if match is None:
        return None
    host = match.group(1).strip("[]").rstrip(".")
    return host or None


class Boundary(Enum):
    """Where an occurrence of a candidate counts when it is looked up."""

    ANYWHERE = "anywhere"
    """As a substring: whole values, tokens, numbers."""
    NAME = "name"
    """A host or URL: not after a label's character (a `.` before it is a subdomain's)."""
    ADDRESS = "address"
    """An e-mail address: not after a character of a local part either."""


_BEFORE = {Boundary.NAME: re.compile(r"[\w-]"), Boundary.ADDRESS: re.compile(r"[\w.+-]")}

BOUNDARIES = {"url": Boundary.NAME, "host": Boundary.NAME, "email": Boundary.ADDRESS}
"""The boundary of each kind of candidate; a kind not named here is looked up anywhere."""


def at_boundaries(boundary: Boundary, before: str, after: str) -> bool:
    """Whether an occurrence stands at `boundary`'s edges: `before` is the character before it
    (empty at the text's start), `after` the two characters after it (fewer at the end). It
    ends where neither a label's character nor a dot and another label follows."""
    if boundary is Boundary.ANYWHERE:
        return True
    if before and _BEFORE[boundary].match(before):
        return False
    if not after:
        return True
    if _CONTINUES.match(after[0]):
        return False
    return not (after[0] == "." and _CONTINUES.match(after[1:2]) is not None)
