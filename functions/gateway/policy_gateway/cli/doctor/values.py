"""`policy-gateway doctor`: the live values, the operator side of a stack.

The flag and the policy chain (SSM parameters the stack names but does not own)
and the alarms that must watch exactly what the function emits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ... import names, settings
from .checkup import Checkup, Problem


def _dimensions(metric: dict[str, Any]) -> dict[str, str]:
    return {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}


def mismatched_alarms(alarms: Iterable[dict[str, Any]], namespace: str, service: str) -> list[str]:
    """Each alarm on the gateway's namespace that does not watch exactly [service]."""
    emitted = {names.METRICS_SERVICE_DIMENSION: service}
    wrong = []
    for alarm in alarms:
        queries = [q["MetricStat"]["Metric"] for q in alarm.get("Metrics", []) if "MetricStat" in q]
        for metric in [alarm, *queries]:
            if metric.get("Namespace") == namespace and _dimensions(metric) != emitted:
                wrong.append(
                    f"alarm {alarm['AlarmName']} watches {namespace} with "
                    f"{_dimensions(metric)}, but the function emits exactly {emitted}"
                )
    return wrong


def read_parameter(checkup: Checkup, name: str) -> str:
    ssm = checkup.deployment.client("ssm")
    try:
        return str(ssm.get_parameter(Name=name)["Parameter"]["Value"])
    except ssm.exceptions.ParameterNotFound:
        raise Problem(
            f"parameter {name} does not exist (the gateway reads the fallback as off and "
            "refuses calls while it has no policy chain)",
            f"`{checkup.init_command}` creates what is missing and never overwrites",
        ) from None


def flag(checkup: Checkup) -> str:
    from ...fallback.flag import parse_flag

    name = checkup.deployment.flag_parameter
    value = read_parameter(checkup, name)
    parsed = parse_flag(value)
    if parsed is None:
        raise Problem(
            f"{name} holds {value[:40]!r}, which the gateway reads as off",
            "`policy-gateway flag on` or `policy-gateway flag off` "
            f"(with {settings.ENV_FLAG_PARAMETER}={name})",
        )
    return f"{name} = {value} (fallback {'on' if parsed else 'off'})"


def policy_chain(checkup: Checkup) -> str:
    from gateway_policies import PolicyConfigError, load_chain

    name = checkup.deployment.policy_config_parameter
    try:
        chain = load_chain(read_parameter(checkup, name))
    except PolicyConfigError as exc:
        raise Problem(
            f"{name} does not load: {exc} (running gateways keep their last good chain; "
            "new instances refuse calls)",
            "`policy-gateway policy set FILE` with a valid chain "
            f"(with {settings.ENV_POLICY_CONFIG_PARAMETER}={name})",
        ) from None
    return f"{name}: {len(chain.policies)} policies ({', '.join(chain.names) or 'none'})"


def alarms(checkup: Checkup) -> str:
    deployment = checkup.deployment
    cloudwatch = deployment.client("cloudwatch")
    namespace, service = deployment.metrics_namespace, deployment.service_name
    alarm_names = deployment.alarm_names
    # Never an empty AlarmNames: DescribeAlarms would return every alarm.
    found = {
        alarm["AlarmName"]: alarm
        for start in range(0, len(alarm_names), 100)
        for alarm in cloudwatch.describe_alarms(AlarmNames=alarm_names[start : start + 100])[
            "MetricAlarms"
        ]
    }
    wrong = [
        f"alarm {name} is in the stack but not in CloudWatch"
        for name in alarm_names
        if name not in found
    ]
    wrong += mismatched_alarms(found.values(), namespace, service)
    emitted = {names.METRICS_SERVICE_DIMENSION: service}
    watching = [
        alarm
        for alarm in cloudwatch.describe_alarms_for_metric(
            Namespace=namespace,
            MetricName=names.METRIC_FALLBACK,
            Dimensions=[{"Name": key, "Value": value} for key, value in emitted.items()],
        )["MetricAlarms"]
        # CloudWatch matches the dimension set exactly; checked here too so
        # the answer does not depend on that.
        if _dimensions(alarm) == emitted
    ]
    if not watching:
        wrong.append(
            f"no alarm watches {namespace}/{names.METRIC_FALLBACK} with "
            f"{names.METRICS_SERVICE_DIMENSION}={service}: a fallback would go unnoticed"
        )
    if wrong:
        raise Problem(
            "; ".join(wrong),
            "`sam deploy` (the template sets the function's service name and every alarm's "
            "dimension from the stack name)",
        )
    return (
        f"{', '.join(sorted(a['AlarmName'] for a in watching))} watch "
        f"{namespace}/{names.METRIC_FALLBACK} {names.METRICS_SERVICE_DIMENSION}={service}"
    )
