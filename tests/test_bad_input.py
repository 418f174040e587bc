"""Bad input never becomes a 500, a stack trace or an upstream call; odd but valid shapes pass.

The gateway is not stricter than the API: what it cannot judge it forwards untouched and
lets the upstream decide.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from policy_gateway.routes.body import MAX_REQUEST_BYTES

from .support.client import HEADERS, error_of, request_body
from .support.fake_upstream import FakeUpstream, Reply, message
from .support.gateway import GatewayFactory

CHAIN = json.dumps(
    {
        "policies": [
            {"policy": "string_replace", "options": {"replacements": [["alpha", "[a]"]]}},
            {"policy": "inject_system_prompt", "options": {"text": "Be kind."}},
        ]
    }
)


def post(url: str, content: bytes | Iterator[bytes], **headers: str) -> httpx2.Response:
    return httpx2.post(
        f"{url}/v1/messages", content=content, headers={**HEADERS, **headers}, timeout=30
    )


def assert_refused(response: httpx2.Response, status: int, kind: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert error_of(response.content)["type"] == kind
    assert "Traceback" not in response.text


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_oversized_body_is_413_before_parsing(
    make_gateway: GatewayFactory, upstream: FakeUpstream, chunked: bool
) -> None:
    url = make_gateway()
    oversized = b"{" + b" " * MAX_REQUEST_BYTES + b"}"

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(oversized), 256 * 1024):
            yield oversized[start : start + 256 * 1024]

    response = post(url, pieces() if chunked else oversized)
    assert_refused(response, 413, "request_too_large")
    assert upstream.requests == []


def test_body_at_the_limit_is_forwarded(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    body = json.dumps(request_body()).encode()
    padded = body[:-1] + b" " * (MAX_REQUEST_BYTES - len(body)) + b"}"
    assert len(padded) == MAX_REQUEST_BYTES
    assert post(url, padded).status_code == 200
    assert upstream.requests[0].body == padded


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"not json", b'{"model": "x",}', b"\xff\xfe\x00garbage", b"[" * 100_000],
    ids=["empty", "truncated", "text", "trailing-comma", "binary", "deep-nesting"],
)
def test_malformed_json_is_400(
    make_gateway: GatewayFactory, upstream: FakeUpstream, raw: bytes
) -> None:
    url = make_gateway(policy_config=CHAIN)
    assert_refused(post(url, raw), 400, "invalid_request_error")
    assert upstream.requests == []


@pytest.mark.parametrize("raw", [b"[]", b'"text"', b"42", b"null", b"true"])
def test_json_that_is_not_an_object_is_400(
    make_gateway: GatewayFactory, upstream: FakeUpstream, raw: bytes
) -> None:
    url = make_gateway(policy_config=CHAIN)
    response = post(url, raw)
    assert_refused(response, 400, "invalid_request_error")
    assert "JSON object" in error_of(response.content)["message"]
    assert upstream.requests == []


@pytest.mark.parametrize(
    "content_type", ["multipart/form-data; boundary=x", "application/x-www-form-urlencoded"]
)
def test_form_encoded_bodies_are_400(
    make_gateway: GatewayFactory, upstream: FakeUpstream, content_type: str
) -> None:
    url = make_gateway()
    response = post(url, json.dumps(request_body()).encode(), **{"content-type": content_type})
    assert_refused(response, 400, "invalid_request_error")
    assert "application/json" in error_of(response.content)["message"]
    assert upstream.requests == []


@pytest.mark.parametrize(
    "content_type", [None, "application/json", "application/json; charset=utf-8", "text/plain"]
)
def test_json_bodies_pass_whatever_their_declared_type(
    make_gateway: GatewayFactory, upstream: FakeUpstream, content_type: str | None
) -> None:
    url = make_gateway()
    body = json.dumps(request_body()).encode()
    declared = {} if content_type is None else {"content-type": content_type}
    assert post(url, body, **declared).status_code == 200
    assert upstream.requests[0].body == body
    assert upstream.requests[0].headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/messages", 405), ("POST", "/v1/complete", 404), ("POST", "/", 404)],
)
def test_other_routes_are_anthropic_shaped(
    make_gateway: GatewayFactory, upstream: FakeUpstream, method: str, path: str, status: int
) -> None:
    url = make_gateway()
    response = httpx2.request(method, url + path, json=request_body(), headers=HEADERS)
    assert response.status_code == status
    error_of(response.content)
    assert upstream.requests == []


HUGE_INPUT = {"rows": [{"id": n, "value": "x" * 100} for n in range(10_000)]}
ODD_SHAPES: dict[str, dict[str, Any]] = {
    "string-content": request_body("alpha as a string"),
    "block-content": {
        **request_body(),
        "messages": [{"role": "user", "content": [{"type": "text", "text": "alpha block"}]}],
    },
    "empty-messages": {**request_body(), "messages": []},
    "empty-content": {**request_body(), "messages": [{"role": "user", "content": []}]},
    "unknown-blocks": {
        **request_body(),
        "system": [{"type": "future_block", "data": 1}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "hologram", "payload": {"note": "alpha"}},
                    {"type": "text", "text": "alpha", "citations": None},
                    {"no_type": True},
                    "a bare string",
                    42,
                ],
            }
        ],
    },
    "huge-tool-input": {
        **request_body(),
        "messages": [
            {"role": "user", "content": "alpha"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "load", "input": HUGE_INPUT}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "alpha result"}],
                    }
                ],
            },
        ],
    },
    "thinking-blocks": {
        **request_body(),
        "messages": [
            {"role": "user", "content": "alpha"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "alpha thought", "signature": "c2ln"},
                    {"type": "redacted_thinking", "data": "alpha=="},
                    {"type": "text", "text": "alpha"},
                ],
            },
        ],
    },
    "messages-not-a-list": {**request_body(), "messages": {"alpha": "alpha"}, "system": 7},
    "unknown-fields": {**request_body("alpha"), "future_parameter": {"nested": [1, 2]}},
}


@pytest.mark.parametrize("shape", ODD_SHAPES.values(), ids=ODD_SHAPES.keys())
def test_odd_shapes_pass_untouched_without_policies(
    make_gateway: GatewayFactory, upstream: FakeUpstream, shape: dict[str, Any]
) -> None:
    url = make_gateway()
    raw = json.dumps(shape).encode()
    upstream.script(Reply(body=message("ok")))
    assert post(url, raw).status_code == 200
    assert upstream.requests[0].body == raw


def _expected_after_chain(shape: dict[str, Any]) -> dict[str, Any]:
    """What the chain must send: 'alpha' replaced in text slots only, the system prompt
    prefixed, everything else (unknown blocks, tool input, thinking) unchanged."""
    expected: dict[str, Any] = json.loads(json.dumps(shape).replace("alpha", "[a]"))
    for path, original in _untouched(shape):
        node = expected
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = original
    system = expected.get("system")
    if isinstance(system, list):
        expected["system"] = [{"type": "text", "text": "Be kind."}, *shape["system"]]
    elif isinstance(system, str) and system:
        expected["system"] = f"Be kind.\n\n{system}"
    else:
        expected["system"] = "Be kind."
    return expected


def _untouched(shape: dict[str, Any]) -> Iterator[tuple[list[Any], Any]]:
    """Paths whose values no text policy may change: anything that is not a text slot."""
    messages = shape.get("messages")
    if not isinstance(messages, list):
        yield ["messages"], messages
        return
    for m, turn in enumerate(messages):
        content = turn.get("content")
        if not isinstance(content, list):
            continue
        for b, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in ("text", "tool_result"):
                yield ["messages", m, "content", b], block


@pytest.mark.parametrize("shape", ODD_SHAPES.values(), ids=ODD_SHAPES.keys())
def test_odd_shapes_through_the_policy_chain(
    make_gateway: GatewayFactory, upstream: FakeUpstream, shape: dict[str, Any]
) -> None:
    url = make_gateway(policy_config=CHAIN)
    upstream.script(Reply(body=message("ok")))
    assert post(url, json.dumps(shape).encode()).status_code == 200
    assert upstream.requests[0].json == _expected_after_chain(shape)
