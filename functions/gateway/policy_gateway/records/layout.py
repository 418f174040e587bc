"""The conversation store's format: O(n) per conversation, every byte as it went.

A coding agent resends its whole conversation on every turn (a 40-turn
session that ends at 1 MB sends about 20 MB), so a call is never stored whole:

- `<caller>/calls/<parent>/<call id>.json`, one object per call, holds only the
  messages new since its parent (from the last assistant message on: the answer
  as the client resent it, then what the client added), the answer as the client
  received it, the request's other parameters and the call's audit fields.
- `<parent>` is the *prefix digest* of the messages the call extends: a chain of
  SHA-256 over each message's exact text (`prefix_digests`), so a call's parent is
  the earlier call whose messages were exactly that prefix, found without any read
  (the writer may only put objects). A retried or edited turn has the same parent:
  a second child, kept as a branch.
- `<caller>/blobs/<digest>.json`: a system prompt or tool list, once per distinct
  text (Claude Code's are about 30 KB and repeat on every call).

Every key starts with the caller (`caller_prefix`), so an operator can grant one
team its own records. A record is one JSON document in which the messages, the
answer and the parameters are the very text that was sent or received, spliced
in, never re-serialized: `spans.members` cuts them out again on reading.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from . import spans

FORMAT_VERSION = 1
ROOT_DIGEST = hashlib.sha256(b"policy-gateway records v1").hexdigest()
"""The parent of a conversation's first call: the digest of no messages."""
CALLS = "calls"
BLOBS = "blobs"
SUFFIX = ".json"
# The request members kept apart: messages per call, system and tools once per text.
MESSAGES = "messages"
SYSTEM = "system"
TOOLS = "tools"
_APART = frozenset({MESSAGES, SYSTEM, TOOLS})
# A caller's name as the first segment of a key: ARNs keep their readable parts,
# a `/` (which would split the prefix an operator grants) is escaped.
_KEY_SAFE = "@._-:=+,"


def caller_prefix(caller: str | None) -> str:
    return quote(caller or "anonymous", safe=_KEY_SAFE)


def caller_from_prefix(prefix: str) -> str:
    return unquote(prefix)


def call_key(caller: str | None, parent: str, call_id: str) -> str:
    return f"{caller_prefix(caller)}/{CALLS}/{parent}/{quote(call_id, safe=_KEY_SAFE)}{SUFFIX}"


def blob_key(caller: str | None, digest: str) -> str:
    return f"{caller_prefix(caller)}/{BLOBS}/{digest}{SUFFIX}"


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def prefix_digests(messages: Sequence[str]) -> list[str]:
    """The prefix digest of messages[:k] for every k from 0 to len(messages)."""
    digests = [ROOT_DIGEST]
    for message in messages:
        digests.append(hashlib.sha256((digests[-1] + text_digest(message)).encode()).hexdigest())
    return digests


def resumes_at(messages: Sequence[str]) -> int:
    """Where a call's own messages start: at its last assistant message (the answer the
    client resent), so its parent is the call that ended right before it; 0 for none."""
    for index in range(len(messages) - 1, -1, -1):
        if _role(messages[index]) == "assistant":
            return index
    return 0


def _role(message: str) -> str | None:
    # Only the role is wanted; the message is small next to the parse of the body.
    try:
        parsed = json.loads(message)
    except ValueError:
        return None
    role = parsed.get("role") if isinstance(parsed, dict) else None
    return role if isinstance(role, str) else None


@dataclass(frozen=True)
class SentRequest:
    """A request body as it went upstream, cut into what the store keeps apart."""

    params: tuple[tuple[str, str], ...]
    """Every other member, (key, exact text), in order."""
    messages: tuple[str, ...]
    system: str | None
    tools: str | None

    @classmethod
    def parse(cls, body: bytes) -> SentRequest:
        """Raises spans.NotAnObject (or UnicodeDecodeError) for a body that is not one
        JSON object with a `messages` array."""
        found = spans.members(body.decode(), frozenset({MESSAGES}))
        by_key = {member.key: member for member in found}
        messages = by_key.get(MESSAGES)
        if messages is None or messages.items is None:
            raise spans.NotAnObject("no messages array")
        system, tools = by_key.get(SYSTEM), by_key.get(TOOLS)
        return cls(
            params=tuple((m.key, m.text) for m in found if m.key not in _APART),
            messages=messages.items,
            system=None if system is None else system.text,
            tools=None if tools is None else tools.text,
        )


@dataclass
class CallRecord:
    """One call as the store holds it (see the module's docstring)."""

    call_id: str
    caller: str | None
    time: float
    """When the call started, epoch seconds."""
    parent: str
    digest: str
    """The prefix digest of all the messages the call sent."""
    offset: int
    """How many messages of the call are its parent's (the ones not stored here)."""
    messages: tuple[str, ...]
    answer: str
    params: tuple[tuple[str, str], ...] = ()
    system: str | None = None
    """The digest of the system prompt's blob."""
    tools: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    """The audit fields: status, stream, chain, chain_version, fallback, attempts,
    policy_actions, timings (the tokens are the answer's own `usage`)."""

    def to_text(self) -> str:
        head = {
            "v": FORMAT_VERSION,
            "call_id": self.call_id,
            "caller": self.caller,
            "time": self.time,
            "parent": self.parent,
            "digest": self.digest,
            "offset": self.offset,
            "system": self.system,
            "tools": self.tools,
            "meta": self.meta,
        }
        params = ",".join(f"{json.dumps(key)}:{text}" for key, text in self.params)
        return (
            json.dumps(head)[:-1]
            + f',"params":{{{params}}},"messages":[{",".join(self.messages)}],'
            + f'"answer":{self.answer}}}'
        )

    @classmethod
    def from_text(cls, text: str) -> CallRecord:
        found = {m.key: m for m in spans.members(text, frozenset({MESSAGES}))}
        params = spans.members(found["params"].text)
        head: Mapping[str, Any] = {key: member.value for key, member in found.items()}
        return cls(
            call_id=str(head["call_id"]),
            caller=head.get("caller"),
            time=float(head["time"]),
            parent=str(head["parent"]),
            digest=str(head["digest"]),
            offset=int(head["offset"]),
            messages=found[MESSAGES].items or (),
            answer=found["answer"].text,
            params=tuple((m.key, m.text) for m in params),
            system=head.get("system"),
            tools=head.get("tools"),
            meta=dict(head.get("meta") or {}),
        )


def answer_text(body: bytes) -> str:
    """An answer as a record keeps it: its exact text when it is JSON, else a JSON string."""
    try:
        text = body.decode()
        json.loads(text)
    except ValueError:
        return json.dumps(body.decode("utf-8", "replace"))
    return text.strip()
