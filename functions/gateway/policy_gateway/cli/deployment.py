"""A deployed gateway stack, as the operator's AWS credentials see it.

Used by the operator commands (`init`, `doctor`), never by the serving path:
it imports boto3 and talks to CloudFormation and Lambda. Clients come from the
standard AWS configuration (profile, region, AWS_ENDPOINT_URL_<SERVICE>), so
the same code runs against AWS and against a local stand-in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .. import settings

# Logical ids in template.yaml that the operator commands look up.
FUNCTION_LOGICAL_ID = "GatewayFunction"
# The alias AutoPublishAlias moves to each new version; the Function URL is its.
FUNCTION_ALIAS = "live"
ALARM_RESOURCE_TYPE = "AWS::CloudWatch::Alarm"


class StackNotFound(Exception):
    """No such stack; `stand_in` is the endpoint that said so when it is make run's stand-in."""

    def __init__(self, stack_name: str, stand_in: str | None) -> None:
        super().__init__(stack_name)
        self.stand_in = stand_in


def region(explicit: str | None = None) -> str | None:
    """The one region rule of every operator command: --region, then AWS_REGION, then
    AWS_DEFAULT_REGION, then the profile's region, as the AWS SDKs do. None when none is
    set (the first AWS call then fails with NoRegionError, which says how to set one)."""
    if explicit:
        return explicit
    named = settings.aws_region()
    if named:
        return named
    import boto3

    return boto3.Session().region_name


def client(service: str, region: str | None) -> Any:
    import boto3
    from botocore.config import Config

    # An operator waiting on a stalled endpoint should see an error, not a hang.
    config = Config(connect_timeout=5, read_timeout=20, retries={"mode": "standard"})
    return boto3.client(service, region_name=region, config=config)  # type: ignore[call-overload]


@dataclass
class Deployment:
    """One stack: its resources, its function's configuration, its template."""

    stack_name: str
    region: str | None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = client(service, self.region)
        return self._clients[service]

    @cached_property
    def stack(self) -> dict[str, Any]:
        cloudformation = self.client("cloudformation")
        try:
            stacks = cloudformation.describe_stacks(StackName=self.stack_name)["Stacks"]
        except cloudformation.exceptions.ClientError as exc:
            if "does not exist" in str(exc):
                from ..local.aws_standin import STAND_IN_HEADER

                answered = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
                stand_in = cloudformation.meta.endpoint_url if STAND_IN_HEADER in answered else None
                raise StackNotFound(self.stack_name, stand_in) from None
            raise
        stack: dict[str, Any] = stacks[0]
        return stack

    @cached_property
    def resources(self) -> list[dict[str, Any]]:
        pages = self.client("cloudformation").get_paginator("list_stack_resources")
        return [
            summary
            for page in pages.paginate(StackName=self.stack_name)
            for summary in page["StackResourceSummaries"]
        ]

    @cached_property
    def template(self) -> dict[str, Any]:
        """The stack's template after the SAM transform (what CloudFormation deployed)."""
        body = self.client("cloudformation").get_template(
            StackName=self.stack_name, TemplateStage="Processed"
        )["TemplateBody"]
        loaded = json.loads(body) if isinstance(body, str) else body
        assert isinstance(loaded, dict)
        return loaded

    def parameter(self, key: str) -> str | None:
        for parameter in self.stack.get("Parameters", []):
            if parameter["ParameterKey"] == key:
                return str(parameter.get("ResolvedValue") or parameter["ParameterValue"])
        return None

    def output(self, key: str) -> str | None:
        for output in self.stack.get("Outputs", []):
            if output["OutputKey"] == key:
                return str(output["OutputValue"])
        return None

    def physical_id(self, logical_id: str) -> str | None:
        for summary in self.resources:
            if summary.get("LogicalResourceId") == logical_id:
                return str(summary["PhysicalResourceId"])
        return None

    @cached_property
    def function_name(self) -> str:
        name = self.physical_id(FUNCTION_LOGICAL_ID)
        if not name:
            raise LookupError(f"stack {self.stack_name} has no {FUNCTION_LOGICAL_ID}")
        return name

    @cached_property
    def function(self) -> dict[str, Any]:
        configuration: dict[str, Any] = self.client("lambda").get_function_configuration(
            FunctionName=self.function_name
        )
        return configuration

    @property
    def environment(self) -> dict[str, str]:
        variables: dict[str, str] = self.function.get("Environment", {}).get("Variables", {})
        return variables

    @property
    def flag_parameter(self) -> str:
        return self.environment.get(settings.ENV_FLAG_PARAMETER) or settings.DEFAULT_FLAG_PARAMETER

    @property
    def policy_config_parameter(self) -> str:
        return (
            self.environment.get(settings.ENV_POLICY_CONFIG_PARAMETER)
            or settings.DEFAULT_POLICY_CONFIG_PARAMETER
        )

    @property
    def service_name(self) -> str:
        """The service dimension the function emits (the code's default when unset)."""
        return settings.service_name(self.environment)

    @property
    def metrics_namespace(self) -> str:
        return settings.metrics_namespace(self.environment)

    @property
    def alarm_names(self) -> list[str]:
        return [
            str(summary["PhysicalResourceId"])
            for summary in self.resources
            if summary.get("ResourceType") == ALARM_RESOURCE_TYPE
        ]
