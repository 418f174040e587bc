"""A gateway stack in moto: what `sam deploy` of template.yaml leaves for the operator commands.

moto's CloudFormation creates the function and its role from a template; the
function's environment is the one template.yaml gives the stack (rendered by
tests/support/cfn.py), with whatever a test overrides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import boto3

from .cfn import Stack, load_template

FUNCTION = "GatewayFunction"


def gateway_environment(stack_name: str) -> dict[str, str]:
    """The gateway function's environment in a stack of template.yaml named `stack_name`."""
    # moto ignores a function's Architectures and reports x86_64, so render that.
    stack = Stack(load_template(), stack_name, parameters={"Architecture": "x86_64"})
    variables: dict[str, str] = stack.resources()[FUNCTION]["Properties"]["Environment"][
        "Variables"
    ]
    return variables


def create_gateway_stack(
    stack_name: str,
    environment: Mapping[str, str],
    outputs: Mapping[str, str] | None = None,
    parameters: Mapping[str, str] | None = None,
) -> str:
    """Create the stack with its gateway function; the function's physical name.

    `outputs` and `parameters` (their values as defaults) are what the stack reports.
    """
    function = Stack(
        load_template(), stack_name, parameters={"Architecture": "x86_64"}
    ).resources()[FUNCTION]["Properties"]
    body: dict[str, Any] = {
        "Resources": {
            "GatewayFunctionRole": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []}
                },
            },
            FUNCTION: {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Code": {"ZipFile": "#"},
                    "Handler": function["Handler"],
                    "Runtime": function["Runtime"],
                    "Architectures": function["Architectures"],
                    "Role": {"Fn::GetAtt": ["GatewayFunctionRole", "Arn"]},
                    "Environment": {"Variables": dict(environment)},
                },
            },
        },
    }
    if parameters:
        body["Parameters"] = {
            key: {"Type": "String", "Default": value} for key, value in parameters.items()
        }
    if outputs:
        body["Outputs"] = {key: {"Value": value} for key, value in outputs.items()}
    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(
        StackName=stack_name, TemplateBody=json.dumps(body), Capabilities=["CAPABILITY_IAM"]
    )
    (name,) = [
        summary["PhysicalResourceId"]
        for summary in cloudformation.list_stack_resources(StackName=stack_name)[
            "StackResourceSummaries"
        ]
        if summary["LogicalResourceId"] == FUNCTION
    ]
    return str(name)
