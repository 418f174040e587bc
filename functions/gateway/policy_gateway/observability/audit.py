"""A call's audit trail: what its log line says the policies did and what it cost, counted.

The call line carries `policy_actions` (every action of every policy context
the call used, in order), the `chain_version` that decided, the `model` and
token counts the upstream reported, and the trace id. The same actions count
in PolicyActions by policy and action (and `mode` for a shadow policy's), the
tokens in InputTokens / OutputTokens by model, bounded (`metrics.model_dimension`). The
judge calls the policies made (gateway_policies.judge) sum into `judge_usage` and count in
JudgeCalls, JudgeErrors and JudgeLatency by policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway_policies.judge.record import JudgeCall

from .. import names
from ..call import Call
from . import metrics

MAX_LOGGED_ACTIONS = 100
"""The call line lists at most this many actions (a results file can hold a million blocked
calls; a log event holds 256 KB) and counts the rest in `policy_actions_omitted`. The
metric counts every one."""


def call_fields(call: Call) -> dict[str, Any]:
    """The call line's audit fields; counts their metrics for the call's flush."""
    actions = call.policy_actions()
    for action in actions:
        dimensions = {names.DIMENSION_POLICY: action.policy, names.DIMENSION_ACTION: action.action}
        if action.shadow:
            dimensions[names.DIMENSION_MODE] = names.MODE_SHADOW
        metrics.count_by(names.METRIC_POLICY_ACTIONS, dimensions)
    for model, counts in call.usage.by_model.items():
        by_model = {names.DIMENSION_MODEL: metrics.model_dimension(model)}
        metrics.count_by(names.METRIC_INPUT_TOKENS, by_model, counts["input_tokens"])
        metrics.count_by(names.METRIC_OUTPUT_TOKENS, by_model, counts["output_tokens"])
    judge_calls = call.judge_calls()
    for judged in judge_calls:
        by_policy = {names.DIMENSION_POLICY: judged.policy}
        metrics.count_by(names.METRIC_JUDGE_CALLS, by_policy)
        if judged.error is not None:
            metrics.count_by(names.METRIC_JUDGE_ERRORS, by_policy)
        metrics.milliseconds_by(names.METRIC_JUDGE_LATENCY, by_policy, judged.latency_ms)
    fields: dict[str, Any] = {
        "chain_version": call.chain_version,
        "policy_actions": [action.as_json() for action in actions[:MAX_LOGGED_ACTIONS]],
        **call.usage.fields(),
    }
    if judge_calls:
        fields["judge_usage"] = judge_usage(judge_calls)
    if len(actions) > MAX_LOGGED_ACTIONS:
        fields["policy_actions_omitted"] = len(actions) - MAX_LOGGED_ACTIONS
    if call.trace_id is not None:
        fields["trace_id"] = call.trace_id
    return fields


def judge_usage(calls: Sequence[JudgeCall]) -> dict[str, int]:
    """The call line's `judge_usage`: the judge calls made, those that failed, their tokens."""
    return {
        "calls": len(calls),
        "errors": sum(1 for judged in calls if judged.error is not None),
        "input_tokens": sum(judged.input_tokens for judged in calls),
        "output_tokens": sum(judged.output_tokens for judged in calls),
    }
