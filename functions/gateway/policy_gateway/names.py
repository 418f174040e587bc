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
METRIC_POLICY_BLOCKS = "PolicyBlocks"
METRIC_POLICY_ERRORS = "PolicyErrors"
METRIC_POLICY_CONFIG_ERRORS = "PolicyConfigErrors"
METRIC_AUTH_FAILURES = "AuthFailures"
METRIC_FALLBACK_DENIED = "FallbackDenied"

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

# The retry ladder (issue 26). `PolicyRepairs` is the one metric with the
# dimension set [service, policy]: which policy's changes keep needing repairs.
METRIC_POLICY_REPAIRS = "PolicyRepairs"
METRICS_POLICY_DIMENSION = "policy"
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
