"""What each text was found to hold, kept so a text scanned once is not scanned again.

A coding agent resends its whole conversation every turn: without a memo a
40-turn session scans its first turns 40 times. An entry is keyed by its
partition and a digest of the text alone (never of the block's JSON: clients
move `cache_control` markers every turn). A partition is one policy instance
(a chain change or reload builds new instances, so the old entries are never
found again and age out) and one caller.

The digest is xxh3_128 with a seed drawn per process, over the text's Latin-1
(characters below 256: a copy of the string's bytes) or UTF-16 (any other
text: its UTF-8 costs five times as much), about 0.05 ms per MB with the
encoding, a hundredth of a scan, where keyed BLAKE3 costs 0.17 and blake2b
1.25. xxh3 is not a cryptographic hash, so the partitions are what keeps
callers apart: a text can only ever read an entry its own caller wrote, and
whoever crafts two texts with one digest misleads nobody but themselves (it
would take their own secret upstream, which they can do by other means), and
sees no other caller's entries (not even by timing). A short text in which
nothing was found is its own key (comparing it costs less than hashing it, and
it cannot collide). An entry holds where the text's spans are and, when there
are any, the text as redacted (rebuilding it every turn cost a session about
as much as its digests): what the upstream receives, never a secret it found.

Each partition has a table of its own, so a look-up is one read of a plain
table, with no per-text bookkeeping. Bounded in bytes (an estimate of what each
entry and table holds): the least recently used partition's entries out first,
oldest first (a session resends its texts in the order they were first written,
so within a partition that is the order least recently used too), then its
table; 0 turns it off. Thread-safe: request hooks run on the worker thread, and
more may share it; writes take a lock, reads need none.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

from xxhash import xxh3_128_digest

Found = tuple[tuple[int, int, str], ...]
"""What a text holds: (start, end, kind) of each span to redact, in order."""

Entry = tuple[Found, Mapping[str, int], str]
"""A text's spans, how many of each kind they are, and the text as redacted ("" when
nothing was found)."""

Key = str | bytes
"""The digest of a text, or a short clean text itself."""

Partition = tuple[str, str | None]
"""(the policy instance's partition, the caller)."""

# Measured with tracemalloc (tests/test_memo_memory.py checks them on every shape of
# use), so that the bound is what Python really holds: a soak of 44k calls, each with
# an API key of its own, grew four times past the bound the old estimates gave.
ENTRY_BYTES = 200
"""The memory one entry costs besides its key: its tuple and its slot in the table (the
table's growth included)."""
FOUND_BYTES = 288
"""An entry with spans: their tuple and the read-only counts of their kinds."""
SPAN_BYTES = 192
"""A span (its tuple and offsets), and its kind's count."""
TABLE_BYTES = 480
"""The memory one partition's table costs besides its entries and its caller's name: the
table itself, its key, and its slot among the tables."""
SHORT = 64

_SEED = int.from_bytes(os.urandom(8), "little")
_WIDE = b"\x10"
"""Marks a digest of UTF-16: one byte longer, it never equals a digest of Latin-1."""
_SURROGATES = b"\x20"
"""Marks a digest of UTF-8 with surrogates passed: it never equals one of the other two."""


def digest(text: str) -> bytes:
    """xxh3_128 of the text's characters, in the first of three strict encodings that
    takes it, tagged so two encodings never give one digest.

    Latin-1 takes a text whose characters are all below 256 (ASCII, and most other
    text): a copy of the string's own bytes, where UTF-16 would widen each. UTF-16
    takes any other text but one with surrogates, which it would make ambiguous (a
    pair of them and the character they pair to); that one takes UTF-8 with its
    surrogates passed, three bytes each, never the four of a paired character.
    """
    try:
        return xxh3_128_digest(text.encode("latin-1"), _SEED)
    except UnicodeEncodeError:
        pass
    try:
        return _WIDE + xxh3_128_digest(text.encode("utf-16-le"), _SEED)
    except UnicodeEncodeError:
        return _SURROGATES + xxh3_128_digest(text.encode("utf-8", "surrogatepass"), _SEED)


def held(text: str | bytes) -> int:
    """The memory `text` holds once the request it is in has been serialized: a string
    that is not ASCII then also holds its UTF-8 form, which the first encoder to ask for it
    (orjson, writing the request for the upstream) leaves cached in the string for its life.
    Counted up front: the memo keeps texts the serializer reads after they are counted."""
    size = sys.getsizeof(text)
    if isinstance(text, str) and not text.isascii():
        size += len(text.encode("utf-8", "surrogatepass")) + 1
    return size


def size(key: Key, entry: Entry) -> int:
    found, _, redacted = entry
    if not found:
        return ENTRY_BYTES + held(key)
    spans = FOUND_BYTES + SPAN_BYTES * len(found)
    return ENTRY_BYTES + held(key) + spans + held(redacted)


def table_size(where: Partition) -> int:
    """A table, and the caller's name it keeps alive (one per API key when callers are
    named by their key: a caller's every call can make a partition of its own)."""
    caller = where[1]
    return TABLE_BYTES + (held(caller) if caller is not None else 0)


class _Table(OrderedDict[Key, tuple[Entry, int]]):
    """A partition's entries, each with the bytes it was counted for, in the order they were
    written; and the bytes the table itself was counted for. What is taken off the memo's
    count is what was put on it: a size measured again at eviction may have grown since (a
    string's UTF-8 form), and the count would drift below what the memo holds."""

    __slots__ = ("cost",)

    def __init__(self, cost: int) -> None:
        super().__init__()
        self.cost = cost


class Memo:
    def __init__(self, max_bytes: int = 0) -> None:
        self._lock = threading.Lock()
        # A table per partition, least recently used first.
        self._tables: OrderedDict[Partition, _Table] = OrderedDict()
        self.max_bytes = max_bytes
        self.bytes = 0

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def remember(
        self, partition: str, caller: str | None, text: str, scan: Callable[[str], Entry]
    ) -> Entry:
        """`scan(text)`, or what it gave for the same text, partition and caller."""
        return self.remember_all(partition, caller, (text,), scan)[0]

    def remember_all(
        self,
        partition: str,
        caller: str | None,
        texts: Iterable[str],
        scan: Callable[[str], Entry],
    ) -> list[Entry]:
        """`remember` of each text, in one loop: a session's every turn looks up every
        text it resends, so each look-up is a digest and one read of a plain table."""
        where = (partition, caller)
        # The table is read without the lock: each `get` is one step under the
        # interpreter's lock. Evicted meanwhile, it is read on, and written no more.
        get = self._table(where).get
        found: list[Entry] = []
        append = found.append
        for text in texts:
            short = len(text) <= SHORT
            if short:
                kept = get(text)
                if kept is not None:
                    append(kept[0])
                    continue
            key = digest(text)
            kept = get(key)
            if kept is None:
                entry = scan(text)
                self._put(where, text if short and not entry[0] else key, entry)
                append(entry)
            else:
                append(kept[0])
        return found

    def _table(self, where: Partition) -> _Table:
        """The partition's table, now its most recently used (made if it is new)."""
        with self._lock:
            table = self._tables.get(where)
            if table is not None:
                self._tables.move_to_end(where)
                return table
            table = self._tables[where] = _Table(table_size(where))
            self.bytes += table.cost
            self._evict()
            return table

    def _put(self, where: Partition, key: Key, entry: Entry) -> None:
        cost = size(key, entry)
        with self._lock:
            table = self._tables.get(where)
            if table is None or cost > self.max_bytes or key in table:
                return
            table[key] = (entry, cost)
            self.bytes += cost
            self._evict()

    def _evict(self) -> None:
        """The least recently used partition's oldest entries out first, then its table."""
        while self.bytes > self.max_bytes and self._tables:
            where, table = next(iter(self._tables.items()))
            if table:
                self.bytes -= table.popitem(last=False)[1][1]
            else:
                del self._tables[where]
                self.bytes -= table.cost

    def __len__(self) -> int:
        with self._lock:
            return sum(len(table) for table in self._tables.values())


MEMO = Memo()
"""The process's memo, off until the gateway sizes it (`configure`) from POLICY_MEMO_BYTES."""


def configure(max_bytes: int) -> None:
    if max_bytes < 0:
        raise ValueError(f"the memo's size must be 0 or more bytes, got {max_bytes}")
    MEMO.resize(max_bytes)
