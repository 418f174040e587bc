"""A conversation turn by turn, each policy action where it happened: what `history show`
prints and the page shows.

Per call of the line: the messages the client added (the answer it resent is the
previous call's answer, shown there), the request policies' actions ("2 secrets
redacted here: ..."), a fallback, then the answer as the client received it and
the response policies' actions ("this call blocked by ..."). Text is shown as
recorded; inputs and results longer than `SHOWN_CHARS` are cut, with a mark.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import layout
from .archive import Conversation

SHOWN_CHARS = 2000
USER = "user"
ASSISTANT = "assistant"
TOOL_CALL = "tool call"
TOOL_RESULT = "tool result"
SERVER_TOOL_CALL = "server tool call"
SERVER_TOOL_RESULT = "server tool result"
THINKING = "thinking"
ACTION = "policy"
NOTE = "note"
ERROR = "error"
# The actions a request policy takes (redactions say where they happened themselves).
_REQUEST_ACTIONS = frozenset({"cap", "inject", "rewrite", "strip", "repair"})


@dataclass(frozen=True)
class Entry:
    kind: str
    text: str
    call_id: str


def transcript(conversation: Conversation, through: layout.CallRecord | None = None) -> list[Entry]:
    entries: list[Entry] = []
    for call in conversation.line(through):
        entries.extend(call_entries(conversation, call))
    return entries


def call_entries(conversation: Conversation, call: layout.CallRecord) -> list[Entry]:
    out: list[Entry] = []

    def add(kind: str, text: str) -> None:
        out.append(Entry(kind, text, call.call_id))

    messages = [_parsed(text) for text in call.messages]
    recorded_parent = call.parent != layout.ROOT_DIGEST and any(
        other.digest == call.parent for other in conversation.calls
    )
    if call.offset and not recorded_parent:
        add(NOTE, f"{call.offset} earlier messages were sent before recording began")
    if recorded_parent and messages and messages[0].get("role") == ASSISTANT:
        messages = messages[1:]
    for message in messages:
        role = str(message.get("role", USER))
        for kind, text in _blocks(role, message.get("content")):
            add(kind, text)
    actions = [a for a in call.meta.get("policy_actions", []) if isinstance(a, Mapping)]
    request = [a for a in actions if _on_request(a)]
    for text in action_lines(request):
        add(ACTION, text)
    fallback = call.meta.get("fallback")
    if fallback not in (None, "none"):
        add(ACTION, f"passthrough fallback {fallback}: see the call line of {call.call_id}")
    answer = _parsed(call.answer)
    if answer.get("type") == "error" or ("error" in answer and "content" not in answer):
        found = answer.get("error")
        error: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        add(ERROR, f"{error.get('type', 'error')}: {error.get('message', '')}")
    for kind, text in _blocks(ASSISTANT, answer.get("content")):
        add(kind, text)
    if "content" in answer and "error" in answer:
        add(ERROR, f"the stream ended with an error: {answer['error']}")
    for text in action_lines([a for a in actions if not _on_request(a)]):
        add(ACTION, text)
    others = conversation.siblings(call)
    if others:
        ids = ", ".join(other.call_id for other in others)
        add(NOTE, f"branch: {len(others)} other version(s) of this turn: {ids}")
    return out


def action_lines(actions: Iterable[Mapping[str, Any]]) -> list[str]:
    """Redactions summed by kind, then every other action in order."""
    lines: list[str] = []
    kinds: Counter[str] = Counter()
    for action in actions:
        shadow = " (shadow: would have)" if action.get("shadow") else ""
        if action.get("action") == "redact" and not shadow:
            kinds[str(action.get("kind", "text"))] += int(action.get("count", 1))
            continue
        details = {
            k: v for k, v in action.items() if k not in ("policy", "action", "shadow", "where")
        }
        policy = action.get("policy")
        if action.get("action") == "block":
            tool = details.pop("tool", "a tool call")
            rest = _details(details)
            lines.append(f"this call blocked{shadow} by {policy}: {tool}{rest}")
        else:
            lines.append(f"{policy}{shadow}: {action.get('action')}{_details(details)}")
    if kinds:
        total = sum(kinds.values())
        noun = "secret" if total == 1 else "secrets"
        lines.insert(0, f"{total} {noun} redacted here: {', '.join(sorted(kinds))}")
    return lines


def _details(details: Mapping[str, Any]) -> str:
    if not details:
        return ""
    return " (" + ", ".join(f"{key} {_short(value, 120)}" for key, value in details.items()) + ")"


def _on_request(action: Mapping[str, Any]) -> bool:
    if action.get("action") == "redact":
        return action.get("where") == "request"
    return action.get("action") in _REQUEST_ACTIONS


def _parsed(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {"content": value}


def _blocks(role: str, content: Any) -> list[tuple[str, str]]:
    if isinstance(content, str):
        return [(role, content)]
    if not isinstance(content, list):
        return []
    found: list[tuple[str, str]] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            found.append((role, str(block.get("text", ""))))
        elif kind == "tool_use":
            found.append((TOOL_CALL, _call(block)))
        elif kind in ("server_tool_use", "mcp_tool_use"):
            found.append((SERVER_TOOL_CALL, _call(block)))
        elif kind == "tool_result":
            error = " (error)" if block.get("is_error") else ""
            body = _result_text(block.get("content"))
            found.append((TOOL_RESULT, f"{block.get('tool_use_id')}{error}: {body}"))
        elif isinstance(kind, str) and kind.endswith("_tool_result"):
            body = _short(json.dumps(block.get("content"), ensure_ascii=False), SHOWN_CHARS)
            found.append((SERVER_TOOL_RESULT, f"{kind} {block.get('tool_use_id')}: {body}"))
        elif kind == "thinking":
            found.append((THINKING, _short(str(block.get("thinking", "")), SHOWN_CHARS)))
        elif kind == "redacted_thinking":
            found.append((THINKING, "(redacted thinking)"))
        else:
            found.append((role, f"[{kind}]"))
    return found


def _call(block: Mapping[str, Any]) -> str:
    arguments = _short(json.dumps(block.get("input"), ensure_ascii=False), SHOWN_CHARS)
    return f"{block.get('name')} {block.get('id')}: {arguments}"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return _short(content, SHOWN_CHARS)
    if isinstance(content, list):
        parts = [
            str(part.get("text", "")) if part.get("type") == "text" else f"[{part.get('type')}]"
            for part in content
            if isinstance(part, Mapping)
        ]
        return _short("\n".join(parts), SHOWN_CHARS)
    return ""


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more)"
