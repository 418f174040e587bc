"""The breaker (functions/breaker): the sample alarm events from events/ against moto.

SSM holds the flag, SNS the alert topic, and an SQS queue subscribed to the
topic shows what was published. The handler is called as Lambda calls it: the
alarm event as a dict and a Lambda context.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from fallback_breaker import handler as breaker
from policy_gateway import names, settings

ROOT = Path(__file__).resolve().parents[1]
ALARM = json.loads((ROOT / "events" / "breaker-alarm.json").read_text())
OK = json.loads((ROOT / "events" / "breaker-ok.json").read_text())
FLAG = settings.DEFAULT_FLAG_PARAMETER


@dataclass
class LambdaContext:
    function_name: str = "policy-gateway-fallback-breaker"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = (
        "arn:aws:lambda:us-east-1:123456789012:function:policy-gateway-fallback-breaker"
    )
    aws_request_id: str = "4b0c6c5e-0000-4000-8000-000000000000"


@dataclass
class Alerts:
    ssm: Any
    sqs: Any
    queue_url: str

    def flag(self) -> tuple[str, int]:
        parameter = self.ssm.get_parameter(Name=FLAG)["Parameter"]
        return parameter["Value"], parameter["Version"]

    def set_flag(self, value: str) -> None:
        self.ssm.put_parameter(Name=FLAG, Value=value, Type="String", Overwrite=True)

    def notifications(self) -> list[dict[str, Any]]:
        received = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        ).get("Messages", [])
        return [json.loads(message["Body"]) for message in received]


@pytest.fixture
def alerts(monkeypatch: pytest.MonkeyPatch) -> Alerts:
    sns = boto3.client("sns")
    sqs = boto3.client("sqs")
    topic = sns.create_topic(Name="policy-gateway-alarms")["TopicArn"]
    queue_url = sqs.create_queue(QueueName="oncall")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    monkeypatch.setenv(breaker.ENV_FLAG_PARAMETER, FLAG)
    monkeypatch.setenv(breaker.ENV_ALERT_TOPIC_ARN, topic)
    # The module caches its clients; each test's moto endpoint and region are the same.
    return Alerts(boto3.client("ssm"), sqs, queue_url)


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    result = breaker.handler(event, LambdaContext())  # type: ignore[arg-type]
    assert isinstance(result, dict)
    return result


def test_the_sample_events_are_what_a_lambda_alarm_action_receives() -> None:
    for event, state in ((ALARM, "ALARM"), (OK, "OK")):
        assert event["source"] == "aws.cloudwatch"
        assert event["alarmArn"].endswith(":alarm:" + event["alarmData"]["alarmName"])
        assert event["alarmData"]["state"]["value"] == state
        (metric,) = event["alarmData"]["configuration"]["metrics"]
        stat = metric["metricStat"]["metric"]
        assert stat["namespace"] == names.METRICS_NAMESPACE
        assert stat["name"] == names.METRIC_FALLBACK


def test_alarm_with_the_flag_on_turns_it_off_and_notifies(alerts: Alerts) -> None:
    alerts.set_flag("true")
    result = invoke(ALARM)
    assert result["action"] == breaker.ACTION_FLAG_OFF
    assert result["notified"] is True
    assert alerts.flag() == ("false", 2)
    (notification,) = alerts.notifications()
    assert notification["Subject"].startswith("Policy Gateway: passthrough fallback turned off")
    details = json.loads(notification["Message"])
    assert details["action"] == breaker.ACTION_FLAG_OFF
    assert details["parameter"] == FLAG
    assert details["alarm"] == ALARM["alarmData"]["alarmName"]
    assert details["why"] == ALARM["alarmData"]["state"]["reason"]
    assert "policy-gateway flag on" in details["next"]


def test_a_repeated_alarm_changes_nothing(alerts: Alerts) -> None:
    alerts.set_flag("true")
    invoke(ALARM)
    alerts.notifications()
    result = invoke(ALARM)
    assert result["action"] == breaker.ACTION_NONE
    assert alerts.flag() == ("false", 2)
    assert alerts.notifications() == []


def test_an_ok_event_changes_nothing(alerts: Alerts) -> None:
    alerts.set_flag("true")
    result = invoke(OK)
    assert result["action"] == breaker.ACTION_NONE
    assert alerts.flag() == ("true", 1)
    assert alerts.notifications() == []


@pytest.mark.parametrize("value", ["false", "FALSE", "yes", ""])
def test_a_flag_already_off_changes_nothing(alerts: Alerts, value: str) -> None:
    # Anything but "true" is off to the gateway; the breaker leaves it as it is.
    alerts.set_flag(value or " ")
    result = invoke(ALARM)
    assert result["action"] == breaker.ACTION_NONE
    assert alerts.flag() == (value or " ", 1)
    assert alerts.notifications() == []


def test_the_flag_off_is_logged_with_the_reason(
    alerts: Alerts, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed = io.StringIO()
    monkeypatch.setattr(breaker.logger.registered_handler, "stream", printed)
    alerts.set_flag("true")
    invoke(ALARM)
    lines = [json.loads(line) for line in printed.getvalue().splitlines() if line]
    (warning,) = [line for line in lines if line.get("level") == "WARNING"]
    assert warning["message"] == "passthrough fallbacks surged; turned the fallback flag off"
    assert warning["why"] == ALARM["alarmData"]["state"]["reason"]
    assert warning["function_request_id"] == LambdaContext.aws_request_id
