"""The simulator's judge: answers a judge call (a forced `verdict` call) by markers.

A request whose `tool_choice` names the `verdict` tool is a judging policy's
(gateway_policies.judge). The simulator answers it with a `verdict` call whose
decision a marker in the judged data chooses, so `make run` shows every
judging policy at work without a key or a model:

    [judge:block]     the block breaks a rule (`rule: "simulated"`)
    [judge:replace]   the block is replaced by a fixed text (text blocks only)
    [judge:text]      the judge answers in text, not with the tool: a judge error
    anything else     allowed

A marker reaches the data from the user's message: the simulator's reply
echoes it (text) or carries it in a tool call's input (`/tool bash {"command":
"rm -rf ~ [judge:block]"}`).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from .simulated_reply import simulated_message

VERDICT_TOOL = "verdict"
REPLACEMENT = "(simulated) The judge replaced this text."
JUDGE_OUTPUT_TOKENS = 24
_MARKER = re.compile(r"\[judge:(block|replace|text)\]")


def is_judge_call(body: dict[str, Any]) -> bool:
    choice = body.get("tool_choice")
    return isinstance(choice, dict) and choice.get("name") == VERDICT_TOOL


def _judged(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else {}
    content = last.get("content") if isinstance(last, dict) else ""
    return content if isinstance(content, str) else str(content)


def _decisions(body: dict[str, Any]) -> list[str]:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name") == VERDICT_TOOL:
            schema = tool.get("input_schema", {}).get("properties", {}).get("decision", {})
            return list(schema.get("enum", []))
    return []


def judge_message(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The simulated judge's answer to a judge call, as a Messages API message."""
    found = _MARKER.search(_judged(body))
    marker = found.group(1) if found else "allow"
    decisions = _decisions(body)
    content: list[dict[str, Any]]
    if marker == "text":
        content = [{"type": "text", "text": "(simulated) Looks fine to me."}]
    else:
        if marker not in decisions:
            marker = "block" if marker == "replace" else "allow"
        verdict: dict[str, Any] = {
            "decision": marker,
            "reason": "(simulated) a marker asked for it"
            if found
            else "(simulated) no marker, so allowed",
        }
        if marker != "allow":
            verdict["rule"] = "simulated"
        if marker == "replace":
            verdict["replacement"] = REPLACEMENT
        if "risk" in str(body.get("tools")):
            verdict["risk"] = 0.9 if marker == "block" else 0.1
        content = [
            {
                "type": "tool_use",
                "id": f"toolu_sim_{uuid.uuid4().hex[:24]}",
                "name": VERDICT_TOOL,
                "input": verdict,
            }
        ]
    stop_reason = "end_turn" if marker == "text" else "tool_use"
    return simulated_message(body, model, content, stop_reason, JUDGE_OUTPUT_TOKENS)
