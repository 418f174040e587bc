"""Verdicts already given, so a block judged once is not judged again.

A coding agent resends its conversation every turn and an upstream can repeat
a block; each judge call costs a model call. An entry is keyed by the caller
and a BLAKE2b digest of what decides the verdict (the rules, the model, the
context and the block: never the nonce), so callers never share verdicts, and
one policy instance holds one memo (a chain reload starts afresh). Bounded in
bytes, least recently used first out; 0 turns it off. Only verdicts are kept,
never judge errors: an error is retried on the next sight of the block.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from .prompt import data_json
from .verdict import Verdict

ENTRY_BYTES = 200
"""What one entry costs besides its texts: its key, its slot, the verdict object."""


def key(caller: str | None, *parts: Any) -> tuple[str | None, bytes]:
    return caller, hashlib.blake2b(data_json(parts).encode(), digest_size=20).digest()


def _size(verdict: Verdict) -> int:
    return ENTRY_BYTES + sum(
        len(text) for text in (verdict.reason, verdict.rule, verdict.replacement) if text
    )


class VerdictMemo:
    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str | None, bytes], Verdict] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, found: tuple[str | None, bytes]) -> Verdict | None:
        with self._lock:
            verdict = self._entries.get(found)
            if verdict is not None:
                self._entries.move_to_end(found)
            return verdict

    def put(self, found: tuple[str | None, bytes], verdict: Verdict) -> None:
        size = _size(verdict)
        if size > self._max_bytes:
            return
        with self._lock:
            old = self._entries.pop(found, None)
            if old is not None:
                self._bytes -= _size(old)
            self._entries[found] = verdict
            self._bytes += size
            while self._bytes > self._max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= _size(dropped)

    def __len__(self) -> int:
        return len(self._entries)
