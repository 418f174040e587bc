"""A tool call's input as a client reads it, the same in a response and in a stream.

In a response the input is there whole; in a stream a client assembles it from
the call's start and its `input_json_delta`s, and the SDKs do not all assemble
it alike. A policy that judges a streamed call judges every input a client may
make of it (`assembled_inputs`), and matches each as one text
(`canonical_input`), so a call reads the same however it arrived.
"""

from __future__ import annotations

import json
from typing import Any

from .base import JSONObject

TRACKED_BY_EVERY_SDK = ("tool_use", "server_tool_use")
"""The call blocks whose input every SDK's stream assembles from the deltas."""


def canonical_input(value: Any) -> str:
    """The tool input as the text rules match against, the same in a response and a stream."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def assembled_inputs(block: JSONObject, partials: list[str]) -> list[Any]:
    """Each input an SDK can make of a streamed call: from its start's `input` and the
    `partial_json` of its `input_json_delta`s. ValueError when the partials are not JSON.

    The SDKs disagree at the edges, so every reading is judged: once a delta came, the
    TypeScript SDK takes the partials ({} when all were empty) where the Python SDK keeps
    the start's input unless some partial had text; and both SDKs' plain (non-beta)
    streams leave an `mcp_tool_use`'s input as its start gave it.
    """
    start = block.get("input", {})
    if not partials:
        return [start]
    raw = "".join(partials)
    streamed = json.loads(raw) if raw else {}
    replaced = bool(raw) and block.get("type") in TRACKED_BY_EVERY_SDK
    if replaced or canonical_input(streamed) == canonical_input(start):
        return [streamed]
    return [start, streamed]
