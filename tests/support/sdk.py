"""The official SDK as the tests' client, and the few ways the tests ask through it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import pytest
from anthropic.types import Message

from .fake_upstream import MODEL, Reply

both = pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
"""Run a test once with a JSON answer and once with a stream."""

REPLACE = json.dumps(
    {
        "policies": [
            {
                "policy": "string_replace",
                "options": {"replacements": [["secret-project", "[codename]"]]},
            }
        ]
    }
)
REJECTED = "codename not allowed"


def tagged_rewrite(tag: str) -> dict[str, Any]:
    """A chain that rewrites as REPLACE does (so `reject_the_rewrite` refuses it and the
    call falls back) and stamps which chain ran, and the caller and groups it saw, into
    `metadata.user_id` (`tests.support.policies:Tag`)."""
    return {
        "policies": [
            *json.loads(REPLACE)["policies"],
            {"policy": "tests.support.policies:Tag", "options": {"tag": tag}},
        ]
    }


def reject_the_rewrite(body: dict[str, Any]) -> Reply | None:
    """An upstream rule: refuse exactly what the REPLACE chain produces; the original is fine."""
    if "[codename]" in json.dumps(body):
        return Reply.error(400, "invalid_request_error", REJECTED)
    return None


def sdk(url: str, **kwargs: Any) -> anthropic.Anthropic:
    """The official SDK, pointed at a gateway; no SDK retries so call counts are exact."""
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test-key", max_retries=0, **kwargs)


def count_and_batch(client: anthropic.Anthropic, request: Callable[[], dict[str, Any]]) -> None:
    """Send `request()` to count_tokens and, anew, as the one entry of a new batch: the two
    endpoints besides messages whose requests run the chain. Its `mcp_servers` goes to
    count_tokens as an extra field (the SDK's count_tokens has no parameter for it)."""
    body = request()
    extra = {"mcp_servers": body.pop("mcp_servers")}
    client.messages.count_tokens(model=MODEL, extra_body=extra, **body)
    entry: Any = {"custom_id": "a", "params": {"model": MODEL, "max_tokens": 64, **request()}}
    client.messages.batches.create(requests=[entry])


def client(
    url: str, api_key: str | None = None, auth_token: str | None = None
) -> anthropic.Anthropic:
    """The SDK presenting exactly the credentials given (x-api-key or a bearer token)."""
    return anthropic.Anthropic(base_url=url, max_retries=0, api_key=api_key, auth_token=auth_token)


def with_defaults(**params: Any) -> dict[str, Any]:
    """A Messages call's parameters: these, else a small call saying hello."""
    return {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hello"}],
        **params,
    }


def ask(client: anthropic.Anthropic, streaming: bool, **params: Any) -> Message:
    params = with_defaults(**params)
    if streaming:
        with client.messages.stream(**params) as events:
            return events.get_final_message()
    reply: Message = client.messages.create(**params)
    return reply


USER = "tell me about secret-project"


def ask_text(client: anthropic.Anthropic, stream: bool = False, text: str = USER) -> str:
    params: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        "system": "be brief",
        "metadata": {"user_id": "u-1"},
    }
    if stream:
        with client.messages.stream(**params) as events:
            return events.get_final_text()
    reply = client.messages.create(**params)
    return "".join(block.text for block in reply.content if block.type == "text")


def tool_result(text: str) -> dict[str, Any]:
    """The messages of a turn whose tool (`bash`) printed `text`: what an agent sends next."""
    return {
        "messages": [
            {"role": "user", "content": "check the deploy settings"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "bash",
                        "input": {"command": "cat"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": text}],
            },
        ]
    }
