"""Recorded calls read back into conversations: the operator's side of the store.

Every call record of the chosen callers is read (once per process: a record
never changes, so a `history serve` page that refreshes reads only what landed
since), then joined by digest (layout.py): a call whose parent digest is no
call's own starts a conversation (the root digest, or a prefix recorded before
recording was on), a parent with two children is a branch. A conversation's id
is its first call's prefix digest, shortened; a call is also found by its id.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from . import layout
from .store import RecordStore

_Key = TypeVar("_Key")

ID_LENGTH = 16
READERS = 8
"""Records fetched at once (S3 answers each GET in tens of milliseconds)."""
# What `history list --with` and the page's filter select.
BLOCKED = "blocked"
REDACTED = "redacted"
FALLBACK = "fallback"
MARKS = (BLOCKED, REDACTED, FALLBACK)


@dataclass
class Conversation:
    """The calls that extend one first call, branches included, oldest first."""

    calls: list[layout.CallRecord]

    @property
    def id(self) -> str:
        return self.calls[0].digest[:ID_LENGTH]

    @property
    def caller(self) -> str | None:
        return self.calls[0].caller

    @property
    def started(self) -> float:
        return self.calls[0].time

    @property
    def updated(self) -> float:
        return max(call.time for call in self.calls)

    @cached_property
    def _by_digest(self) -> dict[str, list[layout.CallRecord]]:
        return _grouped(self.calls, lambda call: call.digest)

    @cached_property
    def _by_parent(self) -> dict[str, list[layout.CallRecord]]:
        return _grouped(self.calls, lambda call: call.parent)

    def children(self, call: layout.CallRecord) -> list[layout.CallRecord]:
        return self._by_parent.get(call.digest, [])

    def siblings(self, call: layout.CallRecord) -> list[layout.CallRecord]:
        """The other calls with the same parent: the branches beside this one."""
        return [other for other in self._by_parent.get(call.parent, []) if other is not call]

    @property
    def branches(self) -> int:
        """How many places the conversation forks (a parent with more than one child)."""
        return sum(1 for children in self._by_parent.values() if len(children) > 1)

    def line(self, through: layout.CallRecord | None = None) -> list[layout.CallRecord]:
        """The calls from the first to `through` (default: the latest call, where the
        conversation is now), then on by the latest child at each step."""
        path = [through or self.calls[-1]]
        while path[0].parent in self._by_digest and path[0] is not self.calls[0]:
            path.insert(0, self._by_digest[path[0].parent][-1])
        while True:
            children = self.children(path[-1])
            if not children:
                return path
            path.append(children[-1])

    def messages(self, call: layout.CallRecord) -> list[str]:
        """Every message `call` sent, exact text, as far back as the store holds them."""
        messages = list(call.messages)
        parent = call.parent
        while parent in self._by_digest:
            before = self._by_digest[parent][0]
            messages[:0] = before.messages
            parent = before.parent
        return messages

    def marks(self) -> set[str]:
        found: set[str] = set()
        for call in self.calls:
            found |= call_marks(call)
        return found


def call_marks(call: layout.CallRecord) -> set[str]:
    found = set()
    for action in call.meta.get("policy_actions", []):
        if action.get("shadow"):
            continue
        if action.get("action") == "block":
            found.add(BLOCKED)
        elif action.get("action") == "redact":
            found.add(REDACTED)
    if call.meta.get("fallback") not in (None, "none", "denied"):
        found.add(FALLBACK)
    return found


@dataclass
class Archive:
    """The store, read; `load` re-lists and fetches only records not read before."""

    store: RecordStore
    _records: dict[str, layout.CallRecord] = field(default_factory=dict)
    _blobs: dict[str, Any] = field(default_factory=dict)

    def callers(self) -> list[str]:
        return sorted(
            {layout.caller_from_prefix(obj.key.split("/", 1)[0]) for obj in self.store.list()}
        )

    def load(self, caller: str | None = None) -> list[Conversation]:
        """Every conversation (of `caller` alone, when given), latest activity first."""
        prefix = f"{layout.caller_prefix(caller)}/" if caller is not None else ""
        keys = [
            obj.key
            for obj in self.store.list(prefix)
            if f"/{layout.CALLS}/" in obj.key and obj.key.endswith(layout.SUFFIX)
        ]
        fresh = [key for key in keys if key not in self._records]
        with ThreadPoolExecutor(READERS) as pool:
            for key, text in zip(fresh, pool.map(self.store.get, fresh), strict=True):
                self._records[key] = layout.CallRecord.from_text(text.decode())
        return conversations(self._records[key] for key in keys)

    def blob(self, caller: str | None, digest: str | None) -> Any:
        """A system prompt or tool list, parsed; None when absent."""
        if digest is None:
            return None
        key = layout.blob_key(caller, digest)
        if key not in self._blobs:
            try:
                self._blobs[key] = json.loads(self.store.get(key))
            except (OSError, ValueError, KeyError):
                return None
        return self._blobs[key]

    def find(
        self, wanted: str, found: Sequence[Conversation]
    ) -> tuple[Conversation, layout.CallRecord | None] | None:
        """The conversation `wanted` names (its id, or a prefix of it) or holds (a call id)."""
        for conversation in found:
            if conversation.id.startswith(wanted) and len(wanted) >= 6:
                return conversation, None
            for call in conversation.calls:
                if call.call_id == wanted:
                    return conversation, call
        return None


def conversations(records: Iterable[layout.CallRecord]) -> list[Conversation]:
    """The records of one or more callers joined into conversations."""
    found: list[Conversation] = []
    for calls in _grouped(records, lambda record: record.caller).values():
        calls.sort(key=lambda call: call.time)
        digests = {call.digest for call in calls}
        children = _grouped(calls, lambda call: call.parent)
        roots = _grouped(
            (call for call in calls if call.parent not in digests), lambda call: call.digest
        )
        for first in roots.values():
            members, seen, todo = [], set(), list(first)
            while todo:
                call = todo.pop()
                if id(call) in seen:
                    continue
                seen.add(id(call))
                members.append(call)
                todo.extend(children.get(call.digest, []))
            members.sort(key=lambda call: call.time)
            found.append(Conversation(members))
    found.sort(key=lambda conversation: conversation.updated, reverse=True)
    return found


def _grouped(
    calls: Iterable[layout.CallRecord], key: Callable[[layout.CallRecord], _Key]
) -> defaultdict[_Key, list[layout.CallRecord]]:
    """`calls` by `key`, each group in the order given."""
    found: defaultdict[_Key, list[layout.CallRecord]] = defaultdict(list)
    for call in calls:
        found[key(call)].append(call)
    return found
