"""The audit trail's unit: what `PolicyContext.record` keeps, and what it refuses."""

from __future__ import annotations

import pytest
from gateway_policies import ACTIONS, Policy, PolicyAction, PolicyContext

pytestmark = pytest.mark.unit


class Gate(Policy):
    name = "gate"


def context(**extra: object) -> PolicyContext:
    return PolicyContext("messages", False, "call-1", **extra)  # type: ignore[arg-type]


def test_a_recorded_action_is_an_entry_with_its_details() -> None:
    ctx = context()
    ctx.record(Gate(), "block", tool="bash")
    assert [a.as_json() for a in ctx.actions] == [
        {"policy": "gate", "action": "block", "tool": "bash"}
    ]


def test_a_shadow_context_marks_every_action_it_records() -> None:
    ctx = context(shadow=True)
    ctx.record(Gate(), "redact", kind="email", count=2)
    assert ctx.actions[0].as_json() == {
        "policy": "gate",
        "action": "redact",
        "kind": "email",
        "count": 2,
        "shadow": True,
    }


def test_an_action_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy action 'blocked'"):
        context().record(Gate(), "blocked")
    assert "block" in ACTIONS
    assert "repair" in ACTIONS


def test_a_detail_may_not_hide_the_entrys_own_keys() -> None:
    with pytest.raises(ValueError, match="may not be named"):
        PolicyAction("gate", "block", {"policy": "other"})


def test_a_replay_keeps_who_is_calling_but_no_actions() -> None:
    ctx = context(caller="alice", caller_groups=("contractors",))
    ctx.record(Gate(), "cap", field="max_tokens")
    again = ctx.replay()
    assert (again.caller, again.caller_groups, again.actions) == ("alice", ("contractors",), [])
