"""`text_slots` yields every text field of a request, in order, and nothing else: the
flat walk's shortcuts (flat tool inputs, slots handed out in lists) change neither."""

from __future__ import annotations

from typing import Any

import pytest
from gateway_policies import PolicyContext, slots, text_slots, turns
from gateway_policies.builtin.string_replace import StringReplace

from .support.loop import finishing_order

pytestmark = pytest.mark.unit


def texts(request: dict[str, Any], **options: bool) -> list[str]:
    return [container[key] for container, key in text_slots(request, **options)]


def test_every_text_field_in_order_and_nothing_else() -> None:
    request = {
        "system": [{"type": "text", "text": "s1"}, {"type": "text", "text": 7}],
        "messages": [
            {"role": "user", "content": "m1"},
            "not a message",
            {"role": "user"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "no", "signature": "no"},
                    {"type": "redacted_thinking", "data": "no"},
                    {"type": "text", "text": "t1"},
                    {"type": "tool_use", "id": "no", "name": "no", "input": {"a": "i1", "b": "i2"}},
                    {
                        "type": "server_tool_use",
                        "id": "no",
                        "name": "no",
                        "input": {"a": "i3", "b": {"c": ["i4", 1, None, "i5"]}, "d": "i6"},
                    },
                    {"type": "tool_use", "id": "no", "name": "no", "input": ["i7", {"e": "i8"}]},
                    {"type": "tool_use", "id": "no", "name": "no", "input": "i9"},
                    {"type": "image", "source": {"type": "base64", "data": "no"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "no", "content": "r1"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "no",
                        "content": [
                            {"type": "text", "text": "r2"},
                            {"type": "document", "source": {"type": "text", "data": "d1"}},
                        ],
                    },
                    {"type": "search_result", "source": "no", "title": "no", "content": []},
                    {"type": "tool_result", "tool_use_id": "no", "content": None},
                ],
            },
        ],
    }
    assert texts(request, tool_inputs=True) == [
        "s1",
        "m1",
        "t1",
        *("i1", "i2", "i3", "i4", "i5", "i6", "i7", "i8", "i9"),
        "r1",
        "r2",
        "d1",
    ]
    assert texts(request) == ["s1", "m1", "t1", "r1", "r2", "d1"]
    assert texts(request, system=False) == ["m1", "t1", "r1", "r2", "d1"]


def test_a_flat_input_and_a_mixed_one_yield_their_strings_by_key() -> None:
    flat = {"a": "1", "b": "2"}
    mixed = {"a": "1", "b": 2, "c": "3"}
    request = {
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "input": flat}]},
            {"role": "assistant", "content": [{"type": "tool_use", "input": mixed}]},
        ]
    }
    assert list(text_slots(request, tool_inputs=True)) == [
        (flat, "a"),
        (flat, "b"),
        (mixed, "a"),
        (mixed, "c"),
    ]


def test_many_messages_come_out_whole_and_in_order() -> None:
    """More slots than one list holds (turns.BATCH), from string and block messages."""
    messages: list[dict[str, Any]] = []
    for index in range(500):
        content: Any = f"m{index}"
        if index % 2:
            content = [{"type": "text", "text": f"m{index}"}]
        messages.append({"role": "user", "content": content})
    assert texts({"messages": messages}) == [f"m{index}" for index in range(500)]


def test_a_deeply_nested_input_does_not_exhaust_the_stack() -> None:
    nested: Any = "deep"
    for _ in range(10_000):
        nested = {"k": [nested]}
    request = {
        "messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": nested}]}]
    }
    assert texts(request, tool_inputs=True) == ["deep"]


def test_a_hook_over_thousands_of_messages_lets_another_call_on_its_loop_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The slots come out a few messages at a time, between batches of rewrites, so the
    hook hands the loop back (a turn of no time here) without walking the whole request
    first."""
    monkeypatch.setattr(turns, "TURN_SECONDS", 0.0)
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]} for _ in range(5000)]
    request = {"model": "m", "max_tokens": 5, "messages": messages}
    policy = StringReplace({"replacements": [("hi", "ho")]})
    rewritten: list[str] = []
    walked: list[int] = []
    rewrite, walk = policy.rewrite_counted, slots._collect_blocks

    def counted_rewrite(one: str) -> tuple[str, dict[str, int]]:
        rewritten.append(one)
        return rewrite(one)

    def counted_walk(*args: Any) -> None:
        walked.append(len(rewritten))
        walk(*args)

    monkeypatch.setattr(policy, "rewrite_counted", counted_rewrite)
    monkeypatch.setattr(slots, "_collect_blocks", counted_walk)

    async def large() -> None:
        await policy.on_request(
            request, PolicyContext(endpoint="messages", stream=False, call_id="c")
        )

    assert finishing_order(large) == ["small", "large"]
    assert walked[0] == 0
    assert walked[-1] > 4000  # the last messages walked after most texts were rewritten
    assert texts(request) == ["ho"] * 5000
