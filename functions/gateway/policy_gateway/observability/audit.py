"""A call's audit trail: what its log line says the policies did and what it cost, counted.

The call line carries `policy_actions` (every action of every policy context
the call used, in order), the `chain_version` that decided, the `model` and
token counts the upstream reported, and the trace id. The same actions count
in PolicyActions by policy and action (and `mode` for a shadow policy's), the
tokens in InputTokens / OutputTokens by model, bounded (`metrics.model_dimension`).
"""

from __future__ import annotations

from typing import Any

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
    fields: dict[str, Any] = {
        "chain_version": call.chain_version,
        "policy_actions": [action.as_json() for action in actions[:MAX_LOGGED_ACTIONS]],
        **call.usage.fields(),
    }
    if len(actions) > MAX_LOGGED_ACTIONS:
        fields["policy_actions_omitted"] = len(actions) - MAX_LOGGED_ACTIONS
    if call.trace_id is not None:
        fields["trace_id"] = call.trace_id
    return fields
