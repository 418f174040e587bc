"""What the upstream simulator received, as one readable log line per request.

A local run cannot show what reached Anthropic, but it can show what reached
the simulator standing in for it: after the chain's request policies, the
fallback's and the repairs' changes. Each request the simulator answers logs
one JSON line (`upstream simulator received`) whose `received` field reads at
a glance, and which `policy-gateway logs` prints as it is:

    2026-01-01T12:00:00.123+00:00 upstream received req_sim_… model=claude-sonnet-4-6
      | system: "You are …" | user: "my key is [REDACTED:aws_access_key_id]"
      | redacted: aws_access_key_id=1

(one line: the system prompt, the last messages with their text, tool calls
and tool results, then every `[REDACTED:<kind>]` marker of the whole request,
counted, so a redaction in a tool result or in the system prompt shows even
where the text is cut). It holds the request's content: it is the simulator's,
so it is only ever written on the machine of the person who sent it, and
never in Lambda.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

LOG_UPSTREAM_RECEIVED = "upstream simulator received"
# How much of a conversation the line shows: its last messages, each text cut to
# TEXT_CHARS (a marker past the cut is still counted in `redacted`).
LAST_MESSAGES = 3
TEXT_CHARS = 160
_MARKER = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")


def _cut(text: str, quoted: bool = True) -> str:
    flat = " ".join(text.split())
    shown = flat if len(flat) <= TEXT_CHARS else flat[:TEXT_CHARS] + "…"
    return json.dumps(shown, ensure_ascii=False) if quoted else shown


def _content(content: Any) -> list[str]:
    """Each block of a message (or of a tool result) as a few words."""
    if isinstance(content, str):
        return [_cut(content)]
    if not isinstance(content, list):
        return []
    shown: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            shown.append(_cut(str(block.get("text", ""))))
        elif kind in ("tool_use", "server_tool_use"):
            tool_input = json.dumps(block.get("input"), ensure_ascii=False, separators=(",", ":"))
            shown.append(f"{kind} {block.get('name')} {_cut(tool_input, quoted=False)}")
        elif kind == "tool_result":
            inner = " ".join(_content(block.get("content"))) or '""'
            shown.append(f"tool_result {block.get('tool_use_id')} {inner}")
        else:
            shown.append(str(kind))
    return shown


def received(body: dict[str, Any]) -> str:
    """The request as the line shows it: system prompt, last messages, redaction markers."""
    parts = [f"system: {' '.join(_content(body['system']))}"] if body.get("system") else []
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    if len(messages) > LAST_MESSAGES:
        parts.append(f"(+{len(messages) - LAST_MESSAGES} earlier messages)")
    for message in messages[-LAST_MESSAGES:]:
        parts.append(f"{message.get('role')}: {' '.join(_content(message.get('content')))}")
    markers = Counter(_MARKER.findall(json.dumps(body, ensure_ascii=False)))
    if markers:
        parts.append("redacted: " + ", ".join(f"{k}={n}" for k, n in sorted(markers.items())))
    return " | ".join(parts)


def log_received(body: dict[str, Any], request_id: str) -> None:
    """One line for the request the simulator is about to answer."""
    from ..observability.logs import logger

    logger.info(
        LOG_UPSTREAM_RECEIVED,
        extra={"request_id": request_id, "model": body.get("model"), "received": received(body)},
    )


def is_received_line(line: dict[str, Any]) -> bool:
    return line.get("message") == LOG_UPSTREAM_RECEIVED and isinstance(line.get("received"), str)


def readable_received(line: dict[str, Any], when: str | None = None) -> str:
    """The simulator's line as `policy-gateway logs` prints it."""
    stamp = str(line.get("timestamp") or when or "-")
    return (
        f"{stamp} upstream received {line.get('request_id', '-')} "
        f"model={line.get('model') or '-'} | {line['received']}"
    )
