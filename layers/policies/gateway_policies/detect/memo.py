"""What each text was found to hold, kept so a text scanned once is not scanned again.

A coding agent resends its whole conversation every turn: without a memo a
40-turn session scans its first turns 40 times. Entries are keyed by a digest
of the text alone (never of the block's JSON: clients move `cache_control`
markers every turn) within a namespace that names the rule set and the policy
instance (a chain change builds new instances, so its entries are never
found again and age out).

The digest is keyed BLAKE3 with a key made per process: it costs about a
twentieth of a scan, and one memo can serve every caller, since nobody who
does not know the key can craft two texts with the same digest (xxh3 is
faster but would need one memo per caller). Bounded in bytes (an estimate of
what each entry holds), least recently used out first; 0 turns it off.
Thread-safe: request hooks run on the worker thread, and more may share it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

from blake3 import blake3

Found = tuple[tuple[int, int, str], ...]
"""What a text holds: (start, end, kind) of each span to redact, in order."""

ENTRY_BYTES = 160
"""The memory one entry costs besides its spans: its key, its slot in the table, the tuple."""
SPAN_BYTES = 120

_KEY = os.urandom(32)


def namespace(*parts: str) -> bytes:
    """The key of one namespace's digests, derived from the process's key."""
    return blake3("\x00".join(parts).encode(), key=_KEY).digest()


def digest(space: bytes, text: str) -> bytes:
    return blake3(text.encode("utf-8", "surrogatepass"), key=space).digest(length=16)


def size(found: Found) -> int:
    return ENTRY_BYTES + SPAN_BYTES * len(found)


class Memo:
    def __init__(self, max_bytes: int = 0) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, Found] = OrderedDict()
        self.max_bytes = max_bytes
        self.bytes = 0

    @property
    def on(self) -> bool:
        return self.max_bytes > 0

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def get(self, key: bytes) -> Found | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: bytes, found: Sequence[tuple[int, int, str]]) -> None:
        entry = tuple(found)
        with self._lock:
            if size(entry) > self.max_bytes or key in self._entries:
                return
            self._entries[key] = entry
            self.bytes += size(entry)
            self._evict()

    def _evict(self) -> None:
        while self.bytes > self.max_bytes and self._entries:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= size(dropped)

    def __len__(self) -> int:
        return len(self._entries)


MEMO = Memo()
"""The process's memo, off until the gateway sizes it (`configure`) from POLICY_MEMO_BYTES."""


def configure(max_bytes: int) -> None:
    if max_bytes < 0:
        raise ValueError(f"the memo's size must be 0 or more bytes, got {max_bytes}")
    MEMO.resize(max_bytes)
