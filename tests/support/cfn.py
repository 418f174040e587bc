"""Render template.yaml as CloudFormation would for one stack: intrinsics resolved.

Enough of CloudFormation's evaluation (Ref, Fn::Sub, Fn::If and the condition
functions, Fn::Join, Fn::Select, Fn::GetAtt) to compare what two stacks of the
same template would name and watch. A resource's physical id is not known
before a deploy; it renders as `<stack>/<LogicalId>`, which is unique per stack
as the real one is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cfnlint.decode.cfn_yaml import load as load_cfn_yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"

Json = dict[str, Any]
_NO_VALUE = object()
_PLACEHOLDER = re.compile(r"\$\{([^}!][^}]*)\}")


def load_template() -> Json:
    """template.yaml with short tags in their long form ({"Ref": ...}, {"Fn::Sub": ...})."""
    loaded = json.loads(json.dumps(load_cfn_yaml(str(TEMPLATE))))
    assert isinstance(loaded, dict)
    return loaded


def insight_rule_body() -> Json:
    """The Contributor Insights rule that ranks fallback callers, as the template writes it."""
    resource = load_template()["Resources"]["FallbackCallersInsightRule"]
    assert resource["Type"] == "AWS::CloudWatch::InsightRule"
    rule = resource["Properties"]
    assert rule["RuleName"] == {"Fn::Sub": "${AWS::StackName}-fallback-callers"}
    assert rule["RuleState"] == "ENABLED"
    body = json.loads(rule["RuleBody"]["Fn::Sub"])
    assert isinstance(body, dict)
    return body


class Stack:
    """One deployment of a template: its name, region and parameter values."""

    def __init__(
        self,
        template: Json,
        name: str,
        region: str = "us-east-1",
        account: str = "123456789012",
        parameters: Mapping[str, str] | None = None,
    ) -> None:
        self.template = template
        self.name = name
        self._pseudo = {
            "AWS::StackName": name,
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackId": f"arn:aws:cloudformation:{region}:{account}:stack/{name}/id",
        }
        declared = template.get("Parameters", {})
        given = dict(parameters or {})
        assert set(given) <= set(declared), set(given) - set(declared)
        self._parameters = {
            key: given.get(key, str(spec.get("Default", ""))) for key, spec in declared.items()
        }
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.resolve(self.template["Conditions"][name]))
        return self._conditions[name]

    def resources(self) -> dict[str, Json]:
        """Every resource this stack would create, with its properties resolved."""
        rendered: dict[str, Json] = {}
        for logical_id, resource in self.template["Resources"].items():
            if "Condition" in resource and not self.condition(resource["Condition"]):
                continue
            rendered[logical_id] = {
                "Type": resource["Type"],
                "Properties": self.resolve(resource.get("Properties", {})),
            }
        return rendered

    def outputs(self) -> dict[str, Any]:
        return {
            key: self.resolve(output["Value"])
            for key, output in self.template.get("Outputs", {}).items()
            if "Condition" not in output or self.condition(output["Condition"])
        }

    def _ref(self, target: str) -> Any:
        if target in self._pseudo:
            return self._pseudo[target]
        if target == "AWS::NoValue":
            return _NO_VALUE
        if target in self._parameters:
            return self._parameters[target]
        assert target in self.template["Resources"] or target.startswith(
            tuple(self.template["Resources"])
        ), f"Ref to unknown {target}"
        return f"{self.name}/{target}"

    def _sub(self, body: str, variables: Mapping[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            key = match.group(1)
            if key in variables:
                return str(variables[key])
            if "." in key and key.split(".", 1)[0] not in self._pseudo:
                logical_id, attribute = key.split(".", 1)
                return f"{self.name}/{logical_id}.{attribute}"
            return str(self._ref(key))

        return _PLACEHOLDER.sub(replace, body).replace("${!", "${")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self._ref(argument)
            if key == "Condition":
                return self.condition(argument)
            if key == "Fn::Sub":
                if isinstance(argument, str):
                    return self._sub(argument, {})
                body, variables = argument
                return self._sub(body, {k: self.resolve(v) for k, v in variables.items()})
            if key == "Fn::If":
                name, if_true, if_false = argument
                return self.resolve(if_true if self.condition(name) else if_false)
            if key == "Fn::Equals":
                left, right = (self.resolve(item) for item in argument)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not self.resolve(argument[0])
            if key == "Fn::And":
                return all(self.resolve(item) for item in argument)
            if key == "Fn::Or":
                return any(self.resolve(item) for item in argument)
            if key == "Fn::Join":
                separator, items = argument
                return separator.join(str(item) for item in self.resolve(items))
            if key == "Fn::Split":
                separator, text = argument
                return str(self.resolve(text)).split(separator)
            if key == "Fn::Select":
                index, items = argument
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::GetAtt":
                logical_id, attribute = (
                    argument.split(".", 1) if isinstance(argument, str) else argument
                )
                return f"{self.name}/{logical_id}.{attribute}"
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not _NO_VALUE}
