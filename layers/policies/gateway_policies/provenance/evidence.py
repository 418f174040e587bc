"""What flow_guard shows a judge about a tainted sink call (`on_taint: "judge"`).

For each tainted value of the call (at most MAX_EVIDENCE, one per kind and
result): its kind, the tool whose result held it, that result's id, and an
excerpt of the result's text around the value, at most EXCERPT_CHARS on each
side. The excerpt is cut from the result as written (the judge reads it as the
agent did), where the value occurs in any case; a value that occurs only in
another spelling (entities, escapes) gets the result's opening instead.

Never a secret: every secret the detector finds in the result is replaced by
`[REDACTED:<kind>]` before the excerpt is cut, so neither a whole secret nor a
piece of one at the excerpt's edge reaches the judge. E-mail addresses stay:
they are what an injected instruction most often names, and what the judge
must see.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..detect import detector
from .candidates import Candidate
from .conversation import Result, is_upstream_result, read_result

MAX_EVIDENCE = 8
EXCERPT_CHARS = 240
VISIBLE_KINDS = frozenset({"email"})
"""Detector kinds left in an excerpt: evidence, not secrets."""
_CALL_TYPES = ("tool_use", "server_tool_use", "mcp_tool_use")


def secret_kinds() -> tuple[str, ...]:
    """The detector's default kinds an excerpt never shows."""
    return tuple(kind for kind in detector().kinds if kind not in VISIBLE_KINDS)


def _blocks(request: Any, answered: Sequence[Any]) -> Iterator[dict[str, Any]]:
    messages = request.get("messages") if isinstance(request, dict) else None
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            yield from (block for block in content if isinstance(block, dict))
    yield from (block for block in answered if isinstance(block, dict))


def _sources(
    request: Any, answered: Sequence[Any], ids: set[str]
) -> dict[str, tuple[str, dict[str, Any]]]:
    """For each result id of `ids`: the name of the tool that wrote it and its block."""
    names: dict[str, str] = {}
    found: dict[str, dict[str, Any]] = {}
    for block in _blocks(request, answered):
        kind, call = block.get("type"), block.get("id")
        if kind in _CALL_TYPES and isinstance(call, str):
            names[call] = str(block.get("name"))
        result = block.get("tool_use_id")
        if (kind == "tool_result" or is_upstream_result(block)) and result in ids:
            found.setdefault(str(result), block)
    return {id_: (names.get(id_, "unknown"), block) for id_, block in found.items()}


def redacted(text: str) -> str:
    """`text` with each secret the detector finds replaced by its kind."""
    spans = sorted((start, end, kind) for kind, (start, end) in detector(secret_kinds()).find(text))
    pieces: list[str] = []
    at = 0
    for start, end, kind in spans:
        if end <= at:
            continue
        pieces += [text[at : max(at, start)], f"[REDACTED:{kind}]"]
        at = max(at, end)
    return "".join([*pieces, text[at:]])


def excerpt(text: str, value: str) -> str:
    """The text around `value` (a normal form: lower case), secrets redacted first."""
    clean = redacted(text)
    at = clean.lower().find(value)
    if at < 0:
        return clean[: 2 * EXCERPT_CHARS]
    start, end = max(0, at - EXCERPT_CHARS), at + len(value) + EXCERPT_CHARS
    return ("…" if start else "") + clean[start:end] + ("…" if end < len(clean) else "")


def evidence(
    taints: Sequence[tuple[Candidate, Result]], request: Any, answered: Sequence[Any]
) -> list[dict[str, Any]]:
    """The evidence for a call whose `taints` are its tainted candidates and their results,
    `request` the conversation as sent and `answered` the answer's blocks before the call."""
    chosen: list[tuple[Candidate, Result]] = []
    seen: set[tuple[str, str]] = set()
    for candidate, result in taints:
        if (candidate.kind, result.id) not in seen and len(chosen) < MAX_EVIDENCE:
            seen.add((candidate.kind, result.id))
            chosen.append((candidate, result))
    sources = _sources(request, answered, {result.id for _, result in chosen})
    items: list[dict[str, Any]] = []
    for candidate, result in chosen:
        tool, block = sources.get(result.id, ("unknown", None))
        raw = "" if block is None else read_result(block, str).text
        items.append(
            {
                "kind": candidate.kind,
                "source_tool": tool,
                "tool_use_id": result.id,
                "excerpt": excerpt(raw, candidate.text),
            }
        )
    return items
