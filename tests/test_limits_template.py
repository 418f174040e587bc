"""Issue 42 in template.yaml: the table the limits count in, their alarm, the spend insight
rule and the dashboard's widgets, each naming what the code emits (names.py)."""

from __future__ import annotations

import json

import pytest
from policy_gateway import names, settings
from policy_gateway.limits.admission import USAGE_USD

from .support.cfn import ROOT, Stack, load_template

pytestmark = pytest.mark.unit

TEMPLATE = load_template()
RESOURCES = TEMPLATE["Resources"]


def test_the_limits_count_in_the_stacks_table() -> None:
    env = RESOURCES["GatewayFunction"]["Properties"]["Environment"]["Variables"]
    assert env[settings.ENV_LIMITS_TABLE] == {"Ref": "FallbackBudgetTable"}


def test_the_limits_unavailable_alarm_watches_the_emitted_metric_and_has_a_runbook() -> None:
    alarm = RESOURCES["LimitsUnavailableAlarm"]["Properties"]
    assert alarm["AlarmName"] == {"Fn::Sub": "${AWS::StackName}-limits-unavailable"}
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        names.METRICS_NAMESPACE,
        names.METRIC_LIMITS_UNAVAILABLE,
    )
    assert alarm["Dimensions"] == [
        {"Name": names.METRICS_SERVICE_DIMENSION, "Value": {"Ref": "AWS::StackName"}}
    ]
    # The same pattern as every alarm on what breaks quietly.
    quiet = RESOURCES["PolicyConfigErrorsAlarm"]["Properties"]
    for key in ("Statistic", "Period", "Threshold", "ComparisonOperator", "TreatMissingData"):
        assert alarm[key] == quiet[key], key
    assert alarm["AlarmActions"] == quiet["AlarmActions"]
    assert "## Runbook: limits-unavailable" in (ROOT / "docs" / "deploy.md").read_text()


def test_the_spend_insight_rule_sums_the_call_lines_usage_usd_by_caller() -> None:
    rule = RESOURCES["SpendByCallerInsightRule"]["Properties"]
    assert rule["RuleName"] == {"Fn::Sub": "${AWS::StackName}-spend-by-caller"}
    body = json.loads(rule["RuleBody"]["Fn::Sub"])
    assert body["LogGroupNames"] == ["${GatewayLogGroup}"]
    assert body["Contribution"]["Keys"] == ["$.caller"]
    assert body["Contribution"]["ValueOf"] == f"$.{USAGE_USD}"
    assert {"Match": "$.message", "In": [names.LOG_CALL_FINISHED]} in body["Contribution"][
        "Filters"
    ]
    assert body["AggregateOn"] == "Sum"


def test_the_dashboard_charts_spend_per_day_and_throttles() -> None:
    stack = Stack(TEMPLATE, "prod-gateway")
    widgets = json.loads(stack.resources()["Dashboard"]["Properties"]["DashboardBody"])["widgets"]
    titles = {widget["properties"]["title"]: widget["properties"] for widget in widgets}
    spend = titles["Spend per day (USD) by caller, top 10"]
    assert spend["period"] == 86400
    assert spend["insightRule"]["ruleName"] == "prod-gateway/SpendByCallerInsightRule.RuleName"
    throttles = json.dumps(titles["Throttled by limit, and limits unavailable"]["metrics"])
    assert f'MetricName=\\"{names.METRIC_THROTTLED}\\"' in throttles
    assert names.METRIC_LIMITS_UNAVAILABLE in throttles
