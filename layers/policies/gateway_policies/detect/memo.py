"""What each text was found to hold, kept so a text scanned once is not scanned again.

A coding agent resends its whole conversation every turn: without a memo a
40-turn session scans its first turns 40 times. An entry is keyed by its
partition and a digest of the text alone (never of the block's JSON: clients
move `cache_control` markers every turn). A partition is one policy instance
(a chain change or reload builds new instances, so the old entries are never
found again and age out) and one caller.

The digest is xxh3_128 with a seed drawn per process, over the text's UTF-8
(ASCII) or UTF-16 (any other text: its UTF-8 costs five times as much), about
0.05 ms per MB with the encoding, a hundredth of a scan, where keyed BLAKE3
costs 0.17 and blake2b 1.25. xxh3 is not a cryptographic hash, so the
partitions are what keeps callers apart: a text can only ever read an entry
its own caller wrote, and whoever crafts two texts with one digest misleads
nobody but themselves (it would take their own secret upstream, which they
can do by other means), and sees no other caller's entries (not even by
timing). A short text in which nothing was found is its own key (comparing
it costs less than hashing it, and it cannot collide); every other entry
holds no text, only where its spans are, so the memo never keeps a secret.

Bounded in bytes (an estimate of what each entry holds), least recently used
out first, over every partition; 0 turns it off. Thread-safe: request hooks
run on the worker thread, and more may share it; writes take a lock, reads
need none.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress

from xxhash import xxh3_128_digest

Found = tuple[tuple[int, int, str], ...]
"""What a text holds: (start, end, kind) of each span to redact, in order."""

Entry = tuple[Found, Mapping[str, int]]
"""A text's spans and how many of each kind they are."""

Key = tuple[str, str | None, str | bytes]
"""(partition, caller, the digest of the text or a short clean text itself)."""

ENTRY_BYTES = 240
"""The memory one entry costs besides its spans: its key, its slot in the table, the tuples."""
SPAN_BYTES = 160
"""A span, and its kind's count."""
SHORT = 64

_SEED = int.from_bytes(os.urandom(8), "little")
_WIDE = b"\x10"
"""Marks a digest of UTF-16: one byte longer, it never equals a digest of UTF-8."""


def digest(text: str) -> bytes:
    if not text.isascii():
        # Strict UTF-16 refuses surrogates, which it would make ambiguous (a pair
        # of them and the character they pair to); such a text takes UTF-8.
        with suppress(UnicodeEncodeError):
            return _WIDE + xxh3_128_digest(text.encode("utf-16-le"), _SEED)
    return xxh3_128_digest(text.encode("utf-8", "surrogatepass"), _SEED)


def size(key: Key, entry: Entry) -> int:
    return ENTRY_BYTES + len(key[2]) + SPAN_BYTES * len(entry[0])


class Memo:
    def __init__(self, max_bytes: int = 0) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, Entry] = OrderedDict()
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
        text it resends, so a call per text would cost as much as the lookups."""
        # Without the lock: each call on the table is one step under the interpreter's
        # lock, and an entry evicted between a lookup and its refresh is simply not refreshed.
        entries = self._entries
        found: list[Entry] = []
        for text in texts:
            short = len(text) <= SHORT
            key: Key = (partition, caller, text)
            entry = entries.get(key) if short else None
            if entry is None:
                key = (partition, caller, digest(text))
                entry = entries.get(key)
                if entry is None:
                    entry = scan(text)
                    self._put((partition, caller, text) if short and not entry[0] else key, entry)
                    found.append(entry)
                    continue
            # Not `suppress`: a context manager per hit would cost as much as the lookup.
            try:  # noqa: SIM105
                entries.move_to_end(key)
            except KeyError:
                pass
            found.append(entry)
        return found

    def _put(self, key: Key, entry: Entry) -> None:
        cost = size(key, entry)
        with self._lock:
            if cost > self.max_bytes or key in self._entries:
                return
            self._entries[key] = entry
            self.bytes += cost
            self._evict()

    def _evict(self) -> None:
        while self.bytes > self.max_bytes and self._entries:
            key, entry = self._entries.popitem(last=False)
            self.bytes -= size(key, entry)

    def __len__(self) -> int:
        return len(self._entries)


MEMO = Memo()
"""The process's memo, off until the gateway sizes it (`configure`) from POLICY_MEMO_BYTES."""


def configure(max_bytes: int) -> None:
    if max_bytes < 0:
        raise ValueError(f"the memo's size must be 0 or more bytes, got {max_bytes}")
    MEMO.resize(max_bytes)
