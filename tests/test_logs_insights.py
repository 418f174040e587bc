"""The Logs Insights interpreter the docs' queries are checked with: it must be able to say no."""

from __future__ import annotations

import json

import pytest

from .support.logs_insights import Query, QueryError, records

pytestmark = pytest.mark.unit

CALL = {
    "level": "INFO",
    "message": "call finished",
    "status": 200,
    "caller": "alice",
    "policy_actions": [
        {"policy": "redact_secrets", "action": "redact", "kind": "email"},
        {"policy": "block_tool_calls", "action": "block", "tool": "bash", "shadow": True},
    ],
}
FAILED = {"level": "INFO", "message": "call finished", "status": 502, "caller": "bob"}
LOADED = {"level": "INFO", "message": "policy chain loaded", "kept_last_good": False}
LINES = records(
    "\n".join(
        [
            json.dumps(CALL, separators=(",", ":")),
            "not json",
            *map(json.dumps, [FAILED, LOADED, FAILED]),
        ]
    )
)


def test_lines_keep_their_text_and_order() -> None:
    assert [record["@timestamp"] for record in LINES] == [0, 1, 2, 3]
    assert LINES[0]["@message"].startswith('{"level":"INFO"')


def test_fields_are_flattened_paths_and_objects_are_not_fields() -> None:
    query = Query("fields caller, policy_actions.1.tool, policy_actions.0, nothing")
    assert query.run(LINES[:1]) == [
        {
            "caller": "alice",
            "policy_actions.1.tool": "bash",
            "policy_actions.0": None,
            "nothing": None,
        }
    ]
    assert query.unseen(LINES) == ["policy_actions.0", "nothing"]


def test_filter_equality_numbers_and_logic() -> None:
    def callers(text: str) -> list[object]:
        return [row["caller"] for row in Query(f"fields caller | {text}").run(LINES)]

    assert callers('filter message = "call finished" and status >= 500') == ["bob", "bob"]
    assert callers("filter status != 200 or caller = 'alice'") == ["alice", "bob", "bob"]
    assert callers('filter not (message = "call finished")') == [None]
    assert callers("filter status < 500 and status > 100") == ["alice"]


def test_like_matches_the_line_as_printed() -> None:
    def count(text: str) -> int:
        return len(Query(text).run(LINES))

    # The bug: the line is compact JSON, so a pattern with a space never matches.
    assert count("""filter @message like '"shadow": true'""") == 0
    assert count("""filter @message like '"shadow":true'""") == 1
    assert count('filter @message like /"action":"block"/') == 1
    assert count("filter message like /^policy chain/") == 1
    assert count("filter message not like /call/") == 1


def test_stats_sort_limit_and_parse() -> None:
    rows = Query(
        'filter message = "call finished" | stats count(*) by caller | sort caller desc'
    ).run(LINES)
    assert rows == [{"caller": "bob", "count(*)": 2}, {"caller": "alice", "count(*)": 1}]
    assert Query("stats count(*) as n").run(LINES) == [{"n": 4}]
    # sum() adds a field's numbers, skipping lines without one (the FAILED lines have 502).
    assert Query("stats sum(status) as total by caller | sort total desc").run(LINES) == [
        {"caller": "bob", "total": 1004},
        {"caller": "alice", "total": 200},
        {"caller": None, "total": 0},
    ]
    assert len(Query("sort @timestamp desc | limit 2").run(LINES)) == 2
    parsed = Query(
        'parse @message /"action":"block","tool":"(?<tool>[^"]+)"/'
        ' | filter tool = "bash" | fields caller, tool'
    )
    assert parsed.run(LINES) == [{"caller": "alice", "tool": "bash"}]


@pytest.mark.parametrize(
    "text",
    [
        "display caller",
        "filter kept_last_good = 'false'",
        "filter status =~ /5../",
        "stats avg(status) by caller",
        "filter caller = ",
        "filter (caller = 'a'",
        "fields 'caller'",
    ],
)
def test_what_is_outside_the_subset_is_refused(text: str) -> None:
    with pytest.raises(QueryError):
        Query(text).run(LINES)
