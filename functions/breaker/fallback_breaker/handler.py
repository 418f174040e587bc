"""Turn the passthrough-fallback flag off when the `FallbackSurge` alarm fires.

The per-caller budget bounds one caller; this bounds the fleet. When fallbacks
surge across every instance (many callers, or one with many keys), the alarm
invokes this function, which sets the flag parameter to `false`, but only if
it is `true`, and says so on the alert topic. Every gateway instance sees the
flag off within FALLBACK_FLAG_TTL_SECONDS.

Idempotent by construction: an OK or INSUFFICIENT_DATA event, a repeated
ALARM, or a flag that is already off (or holds anything but `true`, which the
gateway reads as off) changes nothing and notifies no one. Turning the flag
back on is a human decision, after investigation: `policy-gateway flag on`.

Environment:
    FALLBACK_FLAG_PARAMETER   the flag's SSM parameter (the gateway's own variable)
    ALERT_TOPIC_ARN           the SNS topic told what the breaker did
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes import CloudWatchAlarmEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

ENV_FLAG_PARAMETER = "FALLBACK_FLAG_PARAMETER"
ENV_ALERT_TOPIC_ARN = "ALERT_TOPIC_ARN"
DEFAULT_FLAG_PARAMETER = "/policy-gateway/passthrough-fallback-enabled"

ACTION_FLAG_OFF = "flag_off"
ACTION_NONE = "none"

logger = Logger()


def _config() -> Any:
    from botocore.config import Config

    # An SSM or SNS that stalls must not hold the breaker for boto's 60 s
    # default; Lambda retries a failed asynchronous invocation twice.
    return Config(
        connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"}
    )


@cache
def _client(service: str) -> Any:
    import boto3

    region = os.environ.get("AWS_REGION") or None
    return boto3.client(service, region_name=region, config=_config())  # type: ignore[call-overload]


def _flag_parameter() -> str:
    return os.environ.get(ENV_FLAG_PARAMETER) or DEFAULT_FLAG_PARAMETER


def _notify(subject: str, details: dict[str, Any]) -> bool:
    topic = os.environ.get(ENV_ALERT_TOPIC_ARN)
    if not topic:
        logger.warning("no ALERT_TOPIC_ARN set; nobody was notified")
        return False
    try:
        _client("sns").publish(
            TopicArn=topic, Subject=subject[:100], Message=json.dumps(details, indent=2)
        )
    except Exception:
        # The flag is already off, which is what matters; a retry of this
        # invocation would find it off and notify no one, so say it here.
        logger.exception("could not notify the alert topic", extra={"topic": topic})
        return False
    return True


@event_source(data_class=CloudWatchAlarmEvent)
@logger.inject_lambda_context
def handler(event: CloudWatchAlarmEvent, context: LambdaContext) -> dict[str, Any]:
    alarm = event.alarm_data
    state = alarm.state.value
    parameter = _flag_parameter()
    seen = {
        "alarm": alarm.alarm_name,
        "state": state,
        "previous_state": alarm.previous_state.value,
        "parameter": parameter,
    }
    if state != "ALARM":
        logger.info("alarm is not in ALARM; nothing to do", extra=seen)
        return {**seen, "action": ACTION_NONE}
    ssm = _client("ssm")
    current = str(ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    if current.strip().lower() != "true":
        logger.info("fallback flag is not on; nothing to do", extra=seen)
        return {**seen, "action": ACTION_NONE}
    ssm.put_parameter(Name=parameter, Value="false", Type="String", Overwrite=True)
    details = {
        **seen,
        "action": ACTION_FLAG_OFF,
        "why": alarm.state.reason,
        "alarm_arn": event.alarm_arn,
        "time": event.timestamp,
        "next": "Investigate who fell back (the gateway's fallback WARNING lines, the top-callers "
        "widget, `policy-gateway budget CALLER`); turn the fallback back on with "
        "`policy-gateway flag on` only once the cause is understood.",
    }
    logger.warning("passthrough fallbacks surged; turned the fallback flag off", extra=details)
    notified = _notify(
        f"Policy Gateway: passthrough fallback turned off by {alarm.alarm_name}", details
    )
    return {**details, "notified": notified}
