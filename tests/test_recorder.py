"""The audit record's bounds (gateway_policies.recorder) and the structure-only changed paths."""

from __future__ import annotations

import json

import pytest
from gateway_policies import PolicyAction, PolicyContext, recorder
from gateway_policies.builtin.strip_tools import StripTools
from gateway_policies.runtime.diff import MAX_PATH, changed_locations, format_path, format_paths
from gateway_policies.testing import context, run_request

pytestmark = pytest.mark.unit

KEY = "sk-ant-api03-" + "Qw3rTy" * 16 + "AA"


def test_a_long_name_keeps_its_first_64_characters_and_is_marked() -> None:
    assert recorder.text("web_search") == "web_search"
    assert recorder.text("x" * 64) == "x" * 64
    cut = recorder.text(KEY + "y" * 1000)
    assert cut == KEY[:64] + "…[cut]"
    assert KEY not in cut


def test_a_detail_is_structure_only_and_bounded_in_size_number_and_depth() -> None:
    nested: object = "leaf"
    for _ in range(50):
        nested = [nested]
    kept = recorder.details(
        {
            KEY * 10: "v",
            "names": [KEY * 10] * 500,
            "count": 3,
            "ratio": float("nan"),
            "huge": 10**40,
            "blob": b"bytes",
            "deep": nested,
            **{f"k{i}": i for i in range(100)},
        }
    )
    text = json.dumps(kept)
    assert KEY not in text
    assert len(kept) == recorder.MAX_ITEMS + 1
    assert kept["<more keys>"] == 107 - recorder.MAX_ITEMS
    assert kept["names"][-1] == f"<{500 - recorder.MAX_ITEMS} more>"
    assert kept["count"] == 3
    assert kept["ratio"] == "nan"
    assert kept["huge"] == "<int>"
    assert kept["blob"] == "<bytes>"
    assert "leaf" not in json.dumps(kept["deep"])


def test_a_policy_action_keeps_its_details_bounded_whoever_records_it() -> None:
    ctx = PolicyContext("/v1/messages", False, "call-1")
    ctx.record(StripTools({"names": ["x"]}), "strip", tools=[KEY * 1000])
    direct = PolicyAction("p", "block", {"tool": KEY * 1000})
    for action in (*ctx.actions, direct):
        assert KEY not in json.dumps(action.as_json())
        assert len(json.dumps(action.as_json())) < 200


def test_a_log_line_is_under_the_bound_and_json_whatever_it_is_given() -> None:
    small = recorder.line({"message": "call finished", "status": 200})
    assert json.loads(small) == {"message": "call finished", "status": 200}
    for record in (
        {"message": "call finished", "tools": [KEY * 10_000]},
        {"message": "m" * 600_000, "call_id": "c"},
        {"message": "call finished", "many": ["x" * 60] * 100_000},
        {"message": "call finished", "odd": "\ud800" + KEY * 5000},
    ):
        line = recorder.line(record)
        assert len(line.encode()) < recorder.MAX_LINE_BYTES
        parsed = json.loads(line)
        assert parsed[recorder.LINE_CUT] > recorder.MAX_LINE_BYTES
        assert KEY not in line
    # A lone surrogate (a client's "\ud800") is escaped, not a failed write.
    line = recorder.line({"message": "m", "name": "\ud800"})
    line.encode()
    assert json.loads(line)["name"] == "\ud800"


def test_strip_tools_records_a_server_tool_by_its_type_never_its_name() -> None:
    request = {
        "tools": [
            {"type": "web_search_20250305", "name": KEY * 1000},
            {"name": "lookup", "input_schema": {"type": "object"}},
        ]
    }
    policy = StripTools({"names": ["web_search"]})
    ctx = context()
    run_request(policy, request, ctx=ctx)
    assert [action.details for action in ctx.actions] == [{"tools": ["web_search_20250305"]}]


def test_a_changed_path_quotes_the_api_s_field_names_and_counts_the_client_s_keys() -> None:
    before = {
        "tool_choice": {"type": "tool", "name": "bash", KEY: 1, KEY + "2": 2},
        "metadata": {"user_id": "u", KEY: "x"},
        "messages": [{"role": "user", "content": [{"type": "tool_use", "input": {KEY: 1}}]}],
        KEY: "top",
    }
    after = {
        "tool_choice": {"type": "auto"},
        "metadata": {},
        "messages": [{"role": "user", "content": [{"type": "tool_use", "input": {}}]}],
    }
    paths = format_paths(changed_locations(before, after))
    assert paths == [
        "$.messages[0].content[0].input.<1 key>",
        "$.metadata.<2 keys>",
        "$.<1 other key>",
        "$.tool_choice.name",
        "$.tool_choice.<2 other keys>",
        "$.tool_choice.type",
    ]
    assert format_path(("messages", 3, "content", 1, "text")) == "$.messages[3].content[1].text"


def test_a_changed_path_is_bounded_in_length() -> None:
    deep: tuple[str | int, ...] = ("messages", 0, *(("content", 0) * 200))
    path = format_path(deep)
    assert len(path) == MAX_PATH + len(recorder.CUT)
    assert path.endswith(recorder.CUT)
