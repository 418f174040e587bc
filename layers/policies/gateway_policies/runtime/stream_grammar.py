"""The order and shape of a Messages stream that the SDKs rely on when they assemble it.

The SDKs do not check a stream, they assemble it: the snapshot is
`message_start`'s message, content included; each `content_block_start` is
appended wherever its `index` points; a delta lands on the block its `index`
names, even one that has stopped; a delta of a known type on a block of
another kind is dropped; the TypeScript SDK skips what comes before
`message_start` and begins a second message after `message_stop`. A policy
that judges a stream event by event sees something else than the client then
acts on whenever the upstream breaks the order the API keeps, so the relay
holds every stream to that order and ends one that breaks it with an error:

- `message_start` first (an `error` may come instead) and once, with no
  content; nothing after `message_stop` or `error`;
- blocks one at a time: a start's `index` is the number of blocks started
  before it, a delta or stop names the open block, and `message_delta` or
  `message_stop` come with no block open;
- a delta of a known type only on the kind of block it belongs to, carrying
  its field as a string.

Unknown event and delta types, and unknown block kinds, still pass: the API
adds them, and the SDKs skip what they do not know.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import JSONObject, StreamEvent
from ..upstream_tools import CALL_TYPES

_DELTAS: dict[str, tuple[frozenset[str], str]] = {
    "text_delta": (frozenset({"text"}), "text"),
    "citations_delta": (frozenset({"text"}), "citation"),
    # An mcp_tool_use's input deltas are read by the SDKs' beta streams alone.
    "input_json_delta": (frozenset(CALL_TYPES), "partial_json"),
    "thinking_delta": (frozenset({"thinking"}), "thinking"),
    "signature_delta": (frozenset({"thinking"}), "signature"),
}
"""Each known delta type: the kinds of block it belongs to, and the field it carries."""


class GrammarError(ValueError):
    """The stream broke the order the SDKs rely on; the message says how, never with its data."""


class StreamGrammar:
    """One stream's place in the grammar: fed every event, in order, before anyone acts on it."""

    __slots__ = ("blocks", "ended", "open_index", "open_kind", "started")

    def __init__(self) -> None:
        self.started = False
        self.ended = False
        """Whether `message_stop` or an `error` came: the stream may end, and nothing may follow."""
        self.blocks = 0
        self.open_kind: str | None = None
        """The open block's type ("" for a block without a string type); None: none is open."""
        self.open_index = ""
        """The open block's index as a compact delta writes it (no parse to compare it)."""

    def check(self, event: StreamEvent, kind: str) -> None:
        """Accept `event`, whose data's type is `kind`, or raise GrammarError."""
        if kind == "content_block_delta" and self.started and not self.ended:
            # The commonest event by far, in the API's compact form: its index and
            # delta type were read with its type, so it costs no parse and no second match.
            compact = event.compact_delta
            if compact is not None:
                index, named, field = compact
                if index != self.open_index or self.open_kind is None:
                    raise GrammarError("a content_block_delta named a block that is not open")
                self._belongs(named, field)
                return
        if self.ended:
            raise GrammarError("an event followed the end of the message")
        if kind == "error":
            self.ended = True
            return
        if not self.started:
            if kind != "message_start":
                raise GrammarError("the stream did not begin with message_start")
            message = _payload(event).get("message")
            if not isinstance(message, dict) or message.get("content") != []:
                raise GrammarError("message_start did not carry a message with empty content")
            self.started = True
            return
        if kind == "content_block_delta":
            self._delta(event)
        elif kind == "content_block_start":
            self._start(_payload(event))
        elif kind == "content_block_stop":
            self._expect_open(_payload(event), "content_block_stop")
            self.open_kind = None
        elif kind in ("message_delta", "message_stop"):
            if self.open_kind is not None:
                raise GrammarError(f"{kind} came while a block was open")
            self.ended = kind == "message_stop"
        elif kind == "message_start":
            raise GrammarError("a second message_start")

    def _start(self, payload: JSONObject) -> None:
        if self.open_kind is not None:
            raise GrammarError("a block started while another was open")
        if not _is_index(payload.get("index"), self.blocks):
            raise GrammarError("a block started at an index other than the next one")
        block = payload.get("content_block")
        if not isinstance(block, dict):
            raise GrammarError("a content_block_start carried no block")
        block_type = block.get("type")
        self.open_kind = block_type if isinstance(block_type, str) else ""
        self.open_index = str(self.blocks)
        self.blocks += 1

    def _delta(self, event: StreamEvent) -> None:
        """A delta in any other form than the compact one `check` reads first."""
        payload = _payload(event)
        self._expect_open(payload, "content_block_delta")
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            raise GrammarError("a content_block_delta carried no delta")
        delta_type = delta.get("type")
        if isinstance(delta_type, str) and delta_type in _DELTAS:
            carried = _DELTAS[delta_type][1]
            if carried != "citation" and not isinstance(delta.get(carried), str):
                raise GrammarError(f"a {delta_type} did not carry its {carried} as a string")
            self._belongs(delta_type, carried)

    def _belongs(self, delta_type: str, field: str) -> None:
        kinds, carried = _DELTAS[delta_type]
        if field != carried:
            raise GrammarError(f"a {delta_type} did not carry its {carried} as a string")
        if self.open_kind not in kinds:
            raise GrammarError(f"a {delta_type} came for a block of another kind")

    def _expect_open(self, payload: JSONObject, kind: str) -> None:
        if self.open_kind is None or not _is_index(payload.get("index"), self.blocks - 1):
            raise GrammarError(f"a {kind} named a block that is not open")


def _is_index(value: Any, expected: int) -> bool:
    # bool is an int, and 1.0 == 1, in Python: neither is an index to an SDK.
    return type(value) is int and value == expected


def _payload(event: StreamEvent) -> JSONObject:
    """The event's data, parsed apart from the event so that it is still relayed as its bytes."""
    loaded = json.loads(event.data)
    if not isinstance(loaded, dict):
        raise GrammarError("an event's data is not a JSON object")
    return loaded
