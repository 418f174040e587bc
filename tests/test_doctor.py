"""`policy-gateway init` and `policy-gateway doctor` against a stack in moto.

moto's CloudFormation creates the function and its role from a stack template
but models neither AWS::Lambda::Url, AWS::CloudWatch::Alarm nor a function's
Layers; the fixture creates those through their own APIs, with the values
template.yaml gives this stack (rendered by tests/support/cfn.py). The
Function URL the stack reports is a real gateway on loopback, so the /healthz
check makes a real HTTP request.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from policy_gateway import names, settings
from policy_gateway.cli.doctor.values import mismatched_alarms
from policy_gateway.fallback.flag import FLAG_ALLOWED_PATTERN
from policy_gateway.policy_source import EMPTY_POLICY_CHAIN

from .support.cfn import ROOT, Stack, load_template
from .support.cli import cli
from .support.sdk import REPLACE
from .support.servers import free_port, gateway_process
from .support.stack import create_gateway_stack

STACK = "gw-doctor"
CHECKS = [
    "stack",
    "function",
    "function URL",
    "layers",
    "fallback flag",
    "policy chain",
    "alarms",
    "health",
]


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("bootstrap", "#!/bin/sh\n")
    return buffer.getvalue()


@dataclass
class Deployed:
    stack: Stack
    function_name: str
    adapter_layer: str
    alarm: dict[str, Any]
    url: str


def _deploy(url: str) -> Deployed:
    """What `sam deploy` of template.yaml leaves behind, as far as moto goes."""
    # moto ignores a function's Architectures and reports x86_64, so deploy that.
    stack = Stack(load_template(), STACK, parameters={"Architecture": "x86_64"})
    resources = stack.resources()
    function = resources["GatewayFunction"]["Properties"]
    lambda_ = boto3.client("lambda")
    adapter = lambda_.publish_layer_version(
        LayerName="LambdaAdapterLayerX86", Content={"ZipFile": _zip()}
    )["LayerVersionArn"]
    policies = lambda_.publish_layer_version(
        LayerName=resources["PoliciesLayer"]["Properties"]["LayerName"],
        Content={"ZipFile": _zip()},
    )["LayerVersionArn"]
    name = create_gateway_stack(
        STACK,
        function["Environment"]["Variables"],
        outputs={"FunctionUrl": url + "/"},
        parameters={"FunctionUrlAuthType": "NONE"},
    )
    lambda_.update_function_configuration(FunctionName=name, Layers=[adapter, policies])
    lambda_.create_function_url_config(
        FunctionName=name, AuthType="NONE", InvokeMode="RESPONSE_STREAM"
    )
    alarm = resources["PassthroughFallbackAlarm"]["Properties"]
    boto3.client("cloudwatch").put_metric_alarm(
        **{key: value for key, value in alarm.items() if key != "AlarmDescription"}
    )
    return Deployed(stack, name, adapter, alarm, url)


@pytest.fixture
def deployed(upstream_url: str) -> Iterator[Deployed]:
    env = {"PYTHONPATH": str(ROOT), settings.ENV_UPSTREAM_BASE_URL: upstream_url}
    with gateway_process(env) as (url, _):
        yield _deploy(url)


def doctor(*extra: str) -> tuple[int, dict[str, str], str]:
    result = cli("doctor", "--stack", STACK, "--region", "us-east-1", *extra)
    assert "Traceback" not in result.stderr, result.stderr
    lines: dict[str, str] = {}
    current = ""
    for line in result.stdout.splitlines():
        match = re.match(r"^(OK  |FAIL)  ([^:]+): (.*)$", line)
        if match:
            current = match.group(2)
            lines[current] = f"{match.group(1).strip()} {match.group(3)}"
        elif line.strip().startswith("fix: "):
            lines[current] += "\n" + line.strip()
    return result.returncode, lines, result.stdout


def _names(stack: Stack) -> tuple[str, str]:
    env = stack.resources()["GatewayFunction"]["Properties"]["Environment"]["Variables"]
    return env[settings.ENV_FLAG_PARAMETER], env[settings.ENV_POLICY_CONFIG_PARAMETER]


# ------------------------------------------------------------------------ init


def test_init_creates_what_is_missing_and_never_overwrites(deployed: Deployed, ssm: Any) -> None:
    flag_name, chain_name = _names(deployed.stack)
    assert flag_name == f"/{STACK}/passthrough-fallback-enabled"
    first = cli("init", "--stack", STACK, "--region", "us-east-1")
    assert first.returncode == 0, first.stderr
    assert f"created  {flag_name} = false" in first.stdout
    assert f"created  {chain_name} = " + EMPTY_POLICY_CHAIN in first.stdout

    # The operator turns the fallback on and sets a chain; init again keeps both.
    env = {settings.ENV_FLAG_PARAMETER: flag_name, settings.ENV_POLICY_CONFIG_PARAMETER: chain_name}
    assert cli("flag", "on", env=env).returncode == 0
    ssm.put_parameter(Name=chain_name, Value=REPLACE, Type="String", Overwrite=True)
    again = cli("init", "--stack", STACK, "--region", "us-east-1")
    assert again.returncode == 0, again.stderr
    assert f"kept     {flag_name} (exists, version 2" in again.stdout
    assert f"kept     {chain_name} (exists, version 2" in again.stdout
    assert ssm.get_parameter(Name=flag_name)["Parameter"]["Value"] == "true"
    assert ssm.get_parameter(Name=chain_name)["Parameter"]["Value"] == REPLACE


def test_the_flag_parameter_only_admits_true_or_false(ssm: Any) -> None:
    assert cli("init").returncode == 0
    (described,) = ssm.describe_parameters(
        ParameterFilters=[{"Key": "Name", "Values": [settings.DEFAULT_FLAG_PARAMETER]}]
    )["Parameters"]
    pattern = described["AllowedPattern"]
    assert pattern == FLAG_ALLOWED_PATTERN
    for value in ("true", "false"):
        assert re.fullmatch(pattern, value)
    for typo in ("ture", "on", "1", "yes", "true ", ""):
        assert not re.fullmatch(pattern, typo)
    # The CLI writes nothing else: an unknown action is refused before any call.
    refused = cli("flag", "maybe")
    assert refused.returncode == 2
    assert "invalid choice" in refused.stderr
    # `flag on` keeps the pattern on the parameter.
    assert cli("flag", "on").returncode == 0
    (described,) = ssm.describe_parameters(
        ParameterFilters=[{"Key": "Name", "Values": [settings.DEFAULT_FLAG_PARAMETER]}]
    )["Parameters"]
    assert described["AllowedPattern"] == FLAG_ALLOWED_PATTERN


# ---------------------------------------------------------------------- doctor


def test_doctor_passes_a_healthy_stack(deployed: Deployed) -> None:
    assert cli("init", "--stack", STACK, "--region", "us-east-1").returncode == 0
    code, results, printed = doctor()
    assert code == 0, printed
    assert list(results) == CHECKS
    assert all(line.startswith("OK ") for line in results.values()), printed
    assert deployed.adapter_layer in results["layers"]
    assert f"service={STACK}" in results["alarms"]
    assert deployed.alarm["AlarmName"] in results["alarms"]
    assert f"GET {deployed.url}/healthz answered 200" in results["health"]
    assert "fallback off" in results["fallback flag"]


@pytest.mark.parametrize("unset", ["AWS_DEFAULT_REGION", "AWS_REGION"])
def test_doctor_takes_the_region_as_every_command_does(deployed: Deployed, unset: str) -> None:
    """It once ignored AWS_REGION and then asked for it; the rule is the SDKs' (and every
    command's: tests/test_cli.py)."""
    assert cli("init", "--stack", STACK, unset=(unset,)).returncode == 0
    result = cli("doctor", "--stack", STACK, unset=(unset,))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK    stack: " in result.stdout


def test_doctor_without_init_points_at_init(deployed: Deployed) -> None:
    code, results, printed = doctor()
    assert code == 1
    for check in ("fallback flag", "policy chain"):
        assert results[check].startswith("FAIL "), printed
        assert "does not exist" in results[check]
        assert f"fix: `policy-gateway init --stack {STACK} --region us-east-1`" in results[check]
    assert results["health"].startswith("OK ")


def test_doctor_names_each_fault_and_its_fix(deployed: Deployed, ssm: Any) -> None:
    flag_name, chain_name = _names(deployed.stack)
    ssm.put_parameter(Name=flag_name, Value="yes", Type="String")
    ssm.put_parameter(Name=chain_name, Value='{"policies": [{"policy": "nope"}]}', Type="String")
    lambda_ = boto3.client("lambda")
    # moto's UpdateFunctionUrlConfig keeps the old InvokeMode; recreate instead.
    lambda_.delete_function_url_config(FunctionName=deployed.function_name)
    lambda_.create_function_url_config(
        FunctionName=deployed.function_name, AuthType="NONE", InvokeMode="BUFFERED"
    )
    version = int(deployed.adapter_layer.rsplit(":", 1)[1])
    lambda_.delete_layer_version(LayerName="LambdaAdapterLayerX86", VersionNumber=version)
    env = lambda_.get_function_configuration(FunctionName=deployed.function_name)["Environment"]
    variables = dict(env["Variables"])
    del variables["AWS_LAMBDA_EXEC_WRAPPER"]
    lambda_.update_function_configuration(
        FunctionName=deployed.function_name,
        Environment={"Variables": variables},
        Runtime="python3.12",
    )
    cloudwatch = boto3.client("cloudwatch")
    cloudwatch.put_metric_alarm(
        **{
            **{key: value for key, value in deployed.alarm.items() if key != "AlarmDescription"},
            "Dimensions": [{"Name": "service", "Value": names.SERVICE_NAME}],
        }
    )
    nobody = f"http://127.0.0.1:{free_port()}"

    code, results, printed = doctor("--url", nobody)

    assert code == 1
    assert list(results) == CHECKS
    assert results["stack"].startswith("OK ")
    expected = {
        "function": ("AWS_LAMBDA_EXEC_WRAPPER is missing", "sam deploy"),
        "function URL": ("InvokeMode is BUFFERED", "RESPONSE_STREAM"),
        "layers": (f"{deployed.adapter_layer} cannot be read in this region", "docs/deploy.md"),
        "fallback flag": ("holds 'yes'", "policy-gateway flag on"),
        "policy chain": ("nope", "policy-gateway policy set FILE"),
        "alarms": (f"no alarm watches PolicyGateway/PassthroughFallback with service={STACK}", ""),
        "health": (f"GET {nobody}/healthz failed", "sam logs"),
    }
    for check, (wrong, fix) in expected.items():
        assert results[check].startswith("FAIL "), printed
        assert wrong in results[check], results[check]
        assert "\nfix: " in results[check], results[check]
        assert fix in results[check].split("\nfix: ")[1], results[check]
    assert "Runtime is 'python3.12', the template says 'python3.13'" in results["function"]


def test_doctor_for_an_unknown_stack_says_so() -> None:
    code, results, _ = doctor()
    assert code == 1
    assert list(results) == ["stack"]
    assert f"no stack named {STACK} in us-east-1" in results["stack"]


def test_alarm_dimensions_are_compared_exactly() -> None:
    service = "prod-gateway"
    exact = {
        "AlarmName": "a",
        "Namespace": names.METRICS_NAMESPACE,
        "Dimensions": [{"Name": "service", "Value": service}],
    }
    extra_dimension = {
        "AlarmName": "b",
        "Namespace": names.METRICS_NAMESPACE,
        "Dimensions": [
            {"Name": "service", "Value": service},
            {"Name": "caller", "Value": "x"},
        ],
    }
    other_namespace = {
        "AlarmName": "c",
        "Namespace": "AWS/Lambda",
        "Dimensions": [{"Name": "FunctionName", "Value": "f"}],
    }
    math_on_other_stack = {
        "AlarmName": "d",
        "Metrics": [
            {"Id": "e", "Expression": "m1 * 2"},
            {
                "Id": "m1",
                "MetricStat": {
                    "Metric": {
                        "Namespace": names.METRICS_NAMESPACE,
                        "MetricName": names.METRIC_FALLBACK,
                        "Dimensions": [{"Name": "service", "Value": "staging-gateway"}],
                    }
                },
            },
        ],
    }
    wrong = mismatched_alarms(
        [exact, extra_dimension, other_namespace, math_on_other_stack],
        names.METRICS_NAMESPACE,
        service,
    )
    assert len(wrong) == 2
    assert wrong[0].startswith("alarm b ")
    assert wrong[1].startswith("alarm d ")
    assert "staging-gateway" in wrong[1]


def test_serving_never_imports_the_operator_side() -> None:
    """doctor and deployment (boto3 clients for CloudFormation, Lambda,
    CloudWatch) belong to the CLI; the gateway's cold start must not pay for them."""
    code = (
        "import sys\n"
        "from policy_gateway import settings\n"
        "from policy_gateway.cli import main\n"
        "from policy_gateway.app import create_app\n"
        "create_app(settings.Settings())\n"
        "print(sorted(m for m in sys.modules if m.startswith('policy_gateway')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = result.stdout
    assert "policy_gateway.cli.main" in loaded
    assert "policy_gateway.cli.doctor" not in loaded
    assert "policy_gateway.cli.deployment" not in loaded
