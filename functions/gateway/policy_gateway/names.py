"""The names CloudWatch and X-Ray depend on: the metric identity and the span keys.

template.yaml's alarms and dashboard, the breaker, `policy-gateway doctor` and
the operators' queries use these names; tests assert that the template agrees.
A local run and a deployed function emit the same identity without the template
having to set anything (the template sets the service to the stack's name).
"""

from __future__ import annotations

SERVICE_NAME = "policy-gateway"
METRICS_NAMESPACE = "PolicyGateway"
# Powertools Metrics names the service dimension "service".
METRICS_SERVICE_DIMENSION = "service"

# Metric names. All are emitted with the single dimension set [service], so an
# alarm that names only `service` matches them exactly.
METRIC_REQUESTS = "Requests"
METRIC_LATENCY = "Latency"
METRIC_TIME_TO_FIRST_EVENT = "TimeToFirstEvent"
METRIC_UPSTREAM_4XX = "UpstreamErrors4xx"
METRIC_UPSTREAM_5XX = "UpstreamErrors5xx"
METRIC_UPSTREAM_CONNECTION_ERRORS = "UpstreamConnectionErrors"
METRIC_FALLBACK = "PassthroughFallback"
METRIC_FALLBACK_SUCCEEDED = "PassthroughFallbackSucceeded"
METRIC_FALLBACK_FAILED = "PassthroughFallbackFailed"
METRIC_POLICY_REFUSALS = "PolicyRefusals"
METRIC_POLICY_ERRORS = "PolicyErrors"
METRIC_POLICY_CONFIG_ERRORS = "PolicyConfigErrors"
METRIC_AUTH_FAILURES = "AuthFailures"
METRIC_FALLBACK_DENIED = "FallbackDenied"
# Issue 34: seconds since the chain version in force was written, per call (watch its
# Maximum: it falls once every environment runs the newest version).
METRIC_CHAIN_VERSION_AGE = "ChainVersionAge"

# X-Ray annotation keys (indexed span attributes) on an upstream attempt's span:
# the fallback's three on the failed attempt, the upstream's status on any that failed.
ANNOTATION_FALLBACK = "passthrough_fallback"
ANNOTATION_FALLBACK_STATUS = "fallback_status"
ANNOTATION_FALLBACK_POLICIES = "fallback_policies"
ANNOTATION_UPSTREAM_STATUS = "upstream_status"
# A plain attribute on every attempt that got an answer: the upstream's id for it
# (`request-id` from Anthropic, `x-amzn-requestid` from Bedrock), as support tickets
# ask for it. The call's log line carries it under the same key.
ATTRIBUTE_UPSTREAM_REQUEST_ID = "upstream_request_id"
# What an upstream attempt's span is named for, "upstream <label> attempt <n>": the
# request as the chain made it, the original the fallback resends, a route passed through.
LABEL_POLICY = "policy"
LABEL_FALLBACK = "passthrough-fallback"
LABEL_PASSTHROUGH = "passthrough"

# ---- Issue 23, the audit trail.
# Every answer of the gateway's with a 5xx status (its own or an upstream's relayed),
# with the dimension set [service]: the 5xx-rate alarm divides it by Requests.
METRIC_RESPONSES_5XX = "Responses5xx"
# Metrics with dimension sets of their own besides [service], each emitted as an
# EMF document of its own (observability/metrics.py): PolicyActions by [service,
# policy, action] (and [service, policy, action, mode] for what a shadow-mode policy
# would have done), tokens by [service, model], PolicyRepairs (issue 26) by
# [service, policy].
METRIC_POLICY_ACTIONS = "PolicyActions"
METRIC_INPUT_TOKENS = "InputTokens"
METRIC_OUTPUT_TOKENS = "OutputTokens"
# Issue 26: which policy's changes keep needing the retry ladder's repairs.
METRIC_POLICY_REPAIRS = "PolicyRepairs"
# Issue 41: every judge call a judging policy made (gateway_policies.judge), those that
# gave no verdict, and how long each took (Milliseconds), by [service, policy].
METRIC_JUDGE_CALLS = "JudgeCalls"
METRIC_JUDGE_ERRORS = "JudgeErrors"
METRIC_JUDGE_LATENCY = "JudgeLatency"
DIMENSION_POLICY = "policy"
DIMENSION_ACTION = "action"
DIMENSION_MODE = "mode"
MODE_SHADOW = "shadow"
DIMENSION_MODEL = "model"
# Issue 42: a call the limits refused, by [service, limit] (the limit's document name), and
# a call whose limits' counts could not be reached, by [service] (alarm LimitsUnavailable).
METRIC_THROTTLED = "Throttled"
DIMENSION_LIMIT = "limit"
METRIC_LIMITS_UNAVAILABLE = "LimitsUnavailable"
# The dimensions besides [service] each of them is emitted with (template.yaml's
# dashboard searches exactly these sets).
DIMENSIONED_METRICS = {
    METRIC_POLICY_ACTIONS: (DIMENSION_POLICY, DIMENSION_ACTION),
    METRIC_INPUT_TOKENS: (DIMENSION_MODEL,),
    METRIC_OUTPUT_TOKENS: (DIMENSION_MODEL,),
    METRIC_POLICY_REPAIRS: (DIMENSION_POLICY,),
    METRIC_THROTTLED: (DIMENSION_LIMIT,),
    METRIC_JUDGE_CALLS: (DIMENSION_POLICY,),
    METRIC_JUDGE_ERRORS: (DIMENSION_POLICY,),
    METRIC_JUDGE_LATENCY: (DIMENSION_POLICY,),
}
# A client can send any model string, and each distinct dimension value is a
# metric CloudWatch bills: only models an upstream answered with are counted,
# at most MAX_MODEL_DIMENSIONS distinct ones per process, the rest as MODEL_OTHER.
MAX_MODEL_DIMENSIONS = 20
MODEL_OTHER = "other"
# The server span's attribute joining a trace to the call's log line (`call_id`).
ATTRIBUTE_CALL_ID = "call_id"
# The log line each load of a policy chain writes, which operators' queries look for.
LOG_POLICY_CHAIN_LOADED = "policy chain loaded"
# The ERROR lines of a chain that failed to load (`policy-gateway logs` shows them by default):
# the last good chain kept, or none ever loaded (calls refused).
LOG_POLICY_CONFIG_KEPT_LAST_GOOD = "policy config unusable; keeping the last good chain"
LOG_POLICY_CONFIG_FAILING_CLOSED = (
    "policy config unusable and no good chain was ever loaded; failing closed"
)
# The log line that ends every call (`policy-gateway logs` and the docs' queries read it).
LOG_CALL_FINISHED = "call finished"

# The retry ladder (issue 26).
# On the span of the attempt a repair answers (or a span of its own before the
# first attempt): the policy whose change was repaired.
ANNOTATION_POLICY_REPAIR = "policy_repair"
# On the failed attempt's span and the fallback's WARNING and EMF line: `full`
# (the original as it arrived) or `narrow` (the non-bypassable policies re-applied).
ANNOTATION_FALLBACK_SCOPE = "fallback_scope"
FALLBACK_SCOPE_FULL = "full"
FALLBACK_SCOPE_NARROW = "narrow"
# The span label of the attempt that sends a repaired request.
LABEL_REPAIR = "repair"

# Issue 43: a recorded call whose record could not be stored (the call itself went on).
METRIC_RECORD_FAILURES = "RecordFailures"
