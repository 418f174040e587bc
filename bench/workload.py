"""What the bench sends: Messages request bodies and the policy chains the gateways run."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path
from typing import Any

# Every request carries TARGET; the `string_replace` chain rewrites it to REWRITTEN,
# which the upstream stub can be told to reject (x-bench-reject) to force a fallback.
TARGET = "BENCH_TARGET"
REWRITTEN = "BENCH_REWRITE"
NOOP_CHAIN = json.dumps({"policies": [{"policy": "noop"}]})
REPLACE_CHAIN = json.dumps(
    {"policies": [{"policy": "string_replace", "options": {"replacements": [[TARGET, REWRITTEN]]}}]}
)
# A cap the bench's requests (max_tokens 256) are under; its shadow twin would lower them.
CAP = {"policy": "cap_max_tokens", "options": {"max": 4096}}
CAP_CHAIN = json.dumps({"policies": [CAP]})
CAP_SHADOW_CHAIN = json.dumps(
    {"policies": [CAP, {"policy": "cap_max_tokens", "options": {"max": 128}, "mode": "shadow"}]}
)
# Empties every block of `emptied_blocks_body` (issue 31): the structural repair's worst case.
EMPTIED = "EMPTIED_BY_POLICY"
EMPTYING_CHAIN = json.dumps(
    {"policies": [{"policy": "string_replace", "options": {"replacements": [[EMPTIED, ""]]}}]}
)
BLOCK_CHAIN = json.dumps(
    {"policies": [{"policy": "block_tool_calls", "options": {"rules": [{"tool": "^bash$"}]}}]}
)


def sdk_body(request: dict[str, Any]) -> bytes:
    """`request` as the official SDKs put it on the wire: no spaces, characters as UTF-8
    (the Python SDK's encoder; the TypeScript SDK's JSON.stringify writes the same)."""
    return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()


def request_body(size: int, text: str = f"Say hello. {TARGET}", stream: bool = False) -> bytes:
    """A Messages request of about `size` bytes: a conversation of alternating turns."""
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": "You are a concise assistant.",
        "messages": [],
    }
    if stream:
        request["stream"] = True
    turn = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 36
    messages: list[dict[str, Any]] = request["messages"]
    while len(json.dumps(request)) + len(turn) < size:
        role = "user" if len(messages) % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [{"type": "text", "text": f"{TARGET} {turn}"}]})
    if messages and messages[-1]["role"] == "user":
        messages.pop()
    padding = max(0, size - len(json.dumps(request)) - 60)
    messages.append({"role": "user", "content": f"{text} {'x' * padding}"})
    return json.dumps(request).encode()


def text_blocks_request(messages: int, blocks: int, block_bytes: int) -> dict[str, Any]:
    """A parsed Messages request of `messages` turns, each of `blocks` text blocks."""
    text = ("Lorem ipsum dolor sit amet. " * (block_bytes // 28 + 1))[:block_bytes]
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "messages": [
            {
                "role": "user" if m % 2 == 0 else "assistant",
                "content": [{"type": "text", "text": f"{m}.{b} {text}"} for b in range(blocks)],
            }
            for m in range(messages)
        ],
    }


def emptied_blocks_body(size: int) -> bytes:
    """A Messages request of about `size` bytes: one turn of text blocks `EMPTYING_CHAIN` empties
    (after a first it keeps), so every block but one is repaired away before sending."""
    block = {"type": "text", "text": EMPTIED}
    count = size // (len(json.dumps(block)) + len(", "))
    content = [{"type": "text", "text": "keep"}, *[block] * count]
    request = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": content}],
    }
    return json.dumps(request).encode()


TURNS = 40
"""The turns of `agent_request`'s session."""


def sources() -> list[str]:
    """The standard library's modules, outside its tests, in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return [path.read_text(errors="replace") for path in sorted(root.glob("*.py"))]


def agent_request(files: list[str], size: int) -> tuple[dict[str, Any], list[int]]:
    """A Claude Code-shaped request of about `size` bytes; also the message count after each
    of its TURNS turns, so a session's turns are its prefixes."""
    tools = [
        {
            "name": f"tool_{index}",
            "description": files[index][:1500],
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
        for index in range(20)
    ]
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": files[20][:12000]}],
        "tools": tools,
        "messages": [{"role": "user", "content": "Review the repository."}],
    }
    marks = []
    used = len(json.dumps(request))
    # Each turn's result is source files, as many as make the last request about `size`.
    share = (size - used) // TURNS
    pending = iter(files[21:])
    for index in range(TURNS):
        text = ""
        while len(text) < share:
            text += next(pending)
        while len(json.dumps(text)) > share:
            text = text[: share - (len(json.dumps(text)) - len(text))]
        call_id = f"toolu_{index:04d}"
        request["messages"] += [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": "tool_0",
                        "input": {
                            "path": f"Lib/module_{index}.py",
                            "command": f"cat module_{index}.py",
                        },
                    },
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
            },
        ]
        marks.append(len(request["messages"]))
    return request, marks
