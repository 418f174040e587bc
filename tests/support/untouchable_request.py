"""A request whose fields the API reads byte for byte each hold a secret, around the caller's text.

The redaction tests fill the text slots (the system prompt, the first question, the inputs
of the history's calls, the tool result's text) and check that redaction reached them and
nothing else: ids, signatures, thinking, encrypted and base64 data, file ids, cache_control
and MCP credentials must reach the upstream unchanged. The tests find blocks by index, so
the order never changes: the user's question; the assistant's thinking, redacted_thinking,
server_tool_use, web_search_tool_result and tool_use; the user's tool_result (its text, then
an image), the `attachments`, a file document and a last text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Secrets where the API reads them byte for byte and redaction must never reach.
KEY, TOKEN = "AKIAIOSFODNN7EXAMPLE", "ghp_" + "a1B2c3D4e5" * 4
SEARCH_ID, CALL_ID = "srvtoolu_01" + KEY, "toolu_01" + KEY


def untouchable_request(
    *,
    system: list[dict[str, Any]],
    question: str | list[dict[str, Any]],
    search: dict[str, Any],
    call: dict[str, Any],
    result: list[dict[str, Any]],
    thinking: str,
    opaque: str,
    image: str,
    attachments: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The request, with the text slots given: `search` and `call` the inputs of the
    server_tool_use and tool_use, `result` the tool result's text blocks. Of the untouchable
    fields, `thinking` is the thinking block's text, `opaque` the secret in the
    redacted_thinking data, the encrypted_content and the file id, `image` the image's
    base64 data, and `attachments` the blocks between the tool result and the file."""
    return {
        "system": system,
        "mcp_servers": [
            {
                "type": "url",
                "url": "https://mcp.example.com",
                "name": "m",
                "authorization_token": TOKEN,
            }
        ],
        "messages": [
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": thinking, "signature": f"sig{KEY}"},
                    {"type": "redacted_thinking", "data": f"opaque{opaque}"},
                    {
                        "type": "server_tool_use",
                        "id": SEARCH_ID,
                        "name": "web_search",
                        "input": search,
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": SEARCH_ID,
                        "content": [
                            {
                                "type": "web_search_result",
                                "url": "https://example.com",
                                "title": "t",
                                "encrypted_content": f"enc{opaque}",
                            }
                        ],
                    },
                    {"type": "tool_use", "id": CALL_ID, "name": "bash", "input": call},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": CALL_ID,
                        "content": [
                            *result,
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": image,
                                },
                            },
                        ],
                    },
                    *attachments,
                    {"type": "document", "source": {"type": "file", "file_id": "file_" + opaque}},
                    {"type": "text", "text": "now?", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
    }
