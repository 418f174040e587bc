"""Which texts hold which of a call's candidates, in time linear in both.

One `str.find` per candidate reads the whole text each time: cheap for a
handful of candidates or a short text, but a sink input with thousands of
tokens (a base64 attachment) over a long conversation is their product. Then
the candidates become one Hyperscan literal database, compiled for the call
(linear in the candidates' length) and run once over each text (linear in
the text).

Both answer the same question the same way: a candidate's normal form holds
no NUL (normalise drops it), and a UTF-8 string occurs in another's bytes
exactly where it occurs as characters. A host, URL or e-mail address counts
only where it stands at its boundaries (provenance.hosts): each finder tries
its occurrences until one does, and the characters around an occurrence are
the same read from the string or decoded from the bytes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .hosts import Boundary, at_boundaries

if TYPE_CHECKING:
    import hyperscan

LITERALS_FROM_CANDIDATES = 8
LITERALS_FROM_CHARACTERS = 64 * 1024
"""A call's candidates are looked up with a literal database when there are at least
this many, over at least this many characters of text. Measured (bench/flow.py): a
database costs about 15 µs to compile per candidate and 0.3 ms to run per MB; one
`str.find` costs 0.3 ms per MB, so below 64 KiB a find costs less than the
candidate's share of the compilation, and the finds' total stays linear in the
candidates."""

LITERAL_MAX_BYTES = 8192
"""The longest candidate (UTF-8) put in a literal database: Hyperscan refuses literals
of about 16 000 bytes and more."""

_SEPARATOR = "\x00"
"""Between texts joined for `str.find`: no candidate holds one, so none spans two."""

_LONGEST_CHARACTER = 4
"""UTF-8 bytes of one character: how far around a match its neighbours are decoded."""

Sought = tuple[str, Boundary]
"""A candidate's normal form and where an occurrence of it counts."""


class Finder(Protocol):
    @property
    def read(self) -> int:
        """Characters read so far: the work the lookups did."""
        ...

    def holders(self, texts: Sequence[str], among: Iterable[int]) -> dict[int, int]:
        """For each candidate of `among` that some text holds, the first such text's index."""
        ...


def _first(joined: str, sought: Sought) -> int:
    """Where `sought` first occurs in `joined` at its boundaries, or -1."""
    text, boundary = sought
    position = joined.find(text)
    while position >= 0:
        end = position + len(text)
        if at_boundaries(boundary, joined[position - 1 : position], joined[end : end + 2]):
            return position
        position = joined.find(text, position + 1)
    return position


class StringFinder:
    """One `str.find` per candidate over the texts joined (and one more per occurrence
    that stands inside a longer name)."""

    def __init__(self, candidates: Sequence[Sought]) -> None:
        self.candidates = candidates
        self.read = 0

    def holders(self, texts: Sequence[str], among: Iterable[int]) -> dict[int, int]:
        joined = _SEPARATOR.join(texts)
        starts: list[int] = []
        at = 0
        for text in texts:
            starts.append(at)
            at += len(text) + len(_SEPARATOR)
        found: dict[int, int] = {}
        for index in among:
            self.read += len(joined)
            position = _first(joined, self.candidates[index])
            if position >= 0:
                found[index] = bisect_right(starts, position) - 1
        return found


class _FirstText:
    """A scan's match handler: the text each candidate is first met in at its boundaries."""

    def __init__(self, candidates: Sequence[Sought], lengths: Sequence[int]) -> None:
        self.found: dict[int, int] = {}
        self.text = 0
        self.data = b""
        self._boundaries = [boundary for _, boundary in candidates]
        self._lengths = lengths

    def __call__(self, candidate: int, start: int, end: int, flags: int, context: Any) -> bool:
        if candidate in self.found:
            return False
        boundary = self._boundaries[candidate]
        if boundary is not Boundary.ANYWHERE:
            begin = end - self._lengths[candidate]
            # A window of whole characters' bytes each side: a partial one decodes to nothing.
            before = self.data[max(0, begin - _LONGEST_CHARACTER) : begin]
            after = self.data[end : end + 2 * _LONGEST_CHARACTER]
            if not at_boundaries(
                boundary,
                before.decode(errors="ignore")[-1:],
                after.decode(errors="ignore")[:2],
            ):
                return False
        self.found[candidate] = self.text
        return False


class LiteralFinder:
    """The candidates as one Hyperscan literal database, each text scanned once.

    Compiled per call, so its scratch space is the database's own: the call's
    thread alone uses it (the binding cannot grow one scratch to several
    databases). A candidate longer than a literal may be is found with
    `str.find`: there are few such, as a call's values hold them all. A
    candidate found anywhere is reported once per text; one with boundaries at
    each occurrence until one stands at them.
    """

    def __init__(self, candidates: Sequence[Sought]) -> None:
        import hyperscan

        encoded = [text.encode() for text, _ in candidates]
        self._sought = candidates
        self._lengths = [len(literal) for literal in encoded]
        self._short = [n for n, literal in enumerate(encoded) if len(literal) <= LITERAL_MAX_BYTES]
        self._long = [n for n, literal in enumerate(encoded) if len(literal) > LITERAL_MAX_BYTES]
        self._strings = StringFinder(candidates)
        self._database: hyperscan.Database | None = None
        if self._short:
            self._database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            self._database.compile(
                expressions=[encoded[n] for n in self._short],
                ids=self._short,
                elements=len(self._short),
                flags=[
                    hyperscan.HS_FLAG_SINGLEMATCH if candidates[n][1] is Boundary.ANYWHERE else 0
                    for n in self._short
                ],
                literal=True,
            )
        self._scanned = 0

    @property
    def read(self) -> int:
        return self._scanned + self._strings.read

    def holders(self, texts: Sequence[str], among: Iterable[int]) -> dict[int, int]:
        wanted = set(among)
        found = self._strings.holders(texts, [n for n in self._long if n in wanted])
        if self._database is None:
            return found
        handler = _FirstText(self._sought, self._lengths)
        for number, text in enumerate(texts):
            handler.text = number
            self._scanned += len(text)
            if text:
                handler.data = text.encode()
                self._database.scan(handler.data, match_event_handler=handler)
        found.update((n, text) for n, text in handler.found.items() if n in wanted)
        return found


def finder(candidates: Sequence[Sought], characters: int) -> Finder:
    """The cheaper finder for `candidates` over texts of `characters` in all."""
    if len(candidates) >= LITERALS_FROM_CANDIDATES and characters >= LITERALS_FROM_CHARACTERS:
        return LiteralFinder(candidates)
    return StringFinder(candidates)
