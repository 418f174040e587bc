"""The SAM template, samconfig.toml and events/ agree with the code's names.

The alarm only fires if it names exactly the namespace, metric and dimension set
that the code emits, and the function only finds its flag if the template's
environment uses the names settings.py reads: these tests pin both to the
constants in policy_gateway.names and policy_gateway.settings. cfn-lint and
`sam validate --lint` run offline, so they are part of the suite too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from fallback_breaker import handler as breaker
from gateway_policies.runtime.loader import load_chain
from policy_gateway import names, settings
from policy_gateway.cli import deployment
from policy_gateway.fallback import budget_table
from policy_gateway.observability import tracing_settings

from .support.cfn import ROOT, TEMPLATE, Stack, insight_rule_body, load_template
from .support.clock import eventually
from .support.fake_upstream import FakeUpstream, Reply
from .support.sdk import REPLACE, ask_text, sdk
from .support.servers import gateway_process, json_lines

pytestmark = pytest.mark.deploy

EVENTS = ROOT / "events"
BIN = Path(sys.executable).parent

ADAPTER_LAYER = re.compile(
    r"arn:\$\{AWS::Partition\}:lambda:\$\{AWS::Region\}:753240598075:layer:(\w+):(\d+)"
)
# The Web Adapter's layer per architecture, as aws-lambda-web-adapter publishes it.
ADAPTER_LAYER_NAMES = {"arm64": "LambdaAdapterLayerArm64", "x86_64": "LambdaAdapterLayerX86"}

# Environment variables that belong to Lambda, the Web Adapter or Python.
PLATFORM_ENV = {
    "AWS_LAMBDA_EXEC_WRAPPER",
    "AWS_LWA_INVOKE_MODE",
    "AWS_LWA_PORT",
    "AWS_LWA_READINESS_CHECK_PATH",
    "PYTHONUNBUFFERED",
}

Json = dict[str, Any]


TEMPLATE_JSON = load_template()
RESOURCES: Json = TEMPLATE_JSON["Resources"]
PARAMETERS: Json = TEMPLATE_JSON["Parameters"]
OUTPUTS: Json = TEMPLATE_JSON["Outputs"]


def _resource(logical_id: str, type_: str) -> Json:
    resource = RESOURCES[logical_id]
    assert resource["Type"] == type_
    props = resource["Properties"]
    assert isinstance(props, dict)
    return props


def _function() -> Json:
    return _resource("GatewayFunction", "AWS::Serverless::Function")


def _env() -> Json:
    variables = _function()["Environment"]["Variables"]
    assert isinstance(variables, dict)
    return variables


def _ref(value: object) -> str:
    assert isinstance(value, dict), value
    assert list(value) == ["Ref"], value
    target = value["Ref"]
    assert isinstance(target, str)
    return target


def _parameter_default(name: str) -> str:
    return str(PARAMETERS[name]["Default"])


def _metric_names() -> set[str]:
    """Every metric emitted with exactly the dimension set [service]."""
    return {
        value
        for name, value in vars(names).items()
        if name.startswith("METRIC_") and isinstance(value, str)
    } - set(names.DIMENSIONED_METRICS)


def _if_anthropic(value: object) -> Json:
    return {"Fn::If": ["UsesAnthropic", value, {"Ref": "AWS::NoValue"}]}


# ----------------------------------------------------------------- the function


def test_function_runtime_handler_tracing() -> None:
    fn = _function()
    assert fn["Runtime"] == "python3.13"
    assert fn["Handler"] == "run.sh"
    assert fn["Tracing"] == "Active"
    assert fn["Architectures"] == [{"Ref": "Architecture"}]
    # Long generations stream for minutes; 900 s is the Lambda/Function URL limit.
    assert fn["Timeout"] == 900
    assert fn["MemorySize"] >= 512
    code = ROOT / fn["CodeUri"]
    run_sh = code / "run.sh"
    assert run_sh.is_file()
    assert os.access(run_sh, os.X_OK), "run.sh must be executable: the adapter execs it"
    assert (code / "policy_gateway" / "__init__.py").is_file()


def test_function_url_streams_and_auth_type_is_a_parameter() -> None:
    url = _function()["FunctionUrlConfig"]
    assert url["InvokeMode"] == "RESPONSE_STREAM"
    assert _ref(url["AuthType"]) == "FunctionUrlAuthType"
    param = PARAMETERS["FunctionUrlAuthType"]
    assert param["Default"] == "NONE"
    assert set(param["AllowedValues"]) == {"NONE", "AWS_IAM"}


def test_public_url_has_both_invoke_permissions() -> None:
    # SAM adds the public permissions only for a literal AuthType; with the
    # parameter the template must declare them, both (InvokeFunctionUrl and,
    # since October 2025, InvokeFunction restricted to Function URL calls), on
    # the alias whose URL it is.
    assert TEMPLATE_JSON["Conditions"]["IsPublicUrl"] == {
        "Fn::Equals": [{"Ref": "FunctionUrlAuthType"}, "NONE"]
    }
    permissions = {
        logical_id: resource
        for logical_id, resource in RESOURCES.items()
        if resource["Type"] == "AWS::Lambda::Permission"
        and _ref(resource["Properties"]["FunctionName"]).startswith("GatewayFunction")
    }
    actions: dict[str, Json] = {}
    for resource in permissions.values():
        assert resource["Condition"] == "IsPublicUrl"
        props = resource["Properties"]
        assert _ref(props["FunctionName"]) == "GatewayFunction.Alias"
        assert props["Principal"] == "*"
        actions[props["Action"]] = props
    assert set(actions) == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    assert actions["lambda:InvokeFunctionUrl"]["FunctionUrlAuthType"] == "NONE"
    assert actions["lambda:InvokeFunction"]["InvokedViaFunctionUrl"] is True


def test_snapstart_is_on_by_default_on_a_published_alias() -> None:
    fn = _function()
    assert fn["AutoPublishAlias"] == deployment.FUNCTION_ALIAS
    assert fn["SnapStart"] == {"ApplyOn": {"Ref": "SnapStart"}}
    param = PARAMETERS["SnapStart"]
    assert param["Default"] == "PublishedVersions"
    assert set(param["AllowedValues"]) == {"PublishedVersions", "None"}
    # The URL SAM builds from FunctionUrlConfig is the alias's (its Qualifier),
    # so the snapshot serves every call that comes through it.
    assert "FunctionUrlConfig" in fn
    assert OUTPUTS["FunctionAlias"]["Value"] == {"Ref": "GatewayFunction.Alias"}


def test_the_adapter_posts_the_hooks_the_gateway_serves() -> None:
    env = _env()
    assert (
        env[settings.ENV_SNAPSTART_BEFORE_CHECKPOINT_PATH]
        == settings.DEFAULT_SNAPSTART_BEFORE_CHECKPOINT_PATH
    )
    assert (
        env[settings.ENV_SNAPSTART_AFTER_RESTORE_PATH]
        == settings.DEFAULT_SNAPSTART_AFTER_RESTORE_PATH
    )
    # Not ready is not healthy: the adapter's readiness check (default healthy
    # statuses 100-499) must see /healthz's 503 while a restore runs.
    assert "AWS_LWA_READINESS_CHECK_HEALTHY_STATUS" not in env
    deployed = Stack(TEMPLATE_JSON, "gw").resources()["GatewayFunction"]["Properties"]
    lambda_env = {**deployed["Environment"]["Variables"], settings.ENV_LAMBDA_TASK_ROOT: "/task"}
    configured = settings.Settings.from_env({k: str(v) for k, v in lambda_env.items()})
    assert configured.snapstart_hooks
    assert (
        configured.snapstart_before_checkpoint_path
        == env[settings.ENV_SNAPSTART_BEFORE_CHECKPOINT_PATH]
    )
    assert configured.snapstart_after_restore_path == env[settings.ENV_SNAPSTART_AFTER_RESTORE_PATH]


def test_lambda_metrics_are_the_alias_s() -> None:
    alias = {"Fn::Sub": "${GatewayFunction}:" + deployment.FUNCTION_ALIAS}
    for name, metric in (("LambdaErrorsAlarm", "Errors"), ("LambdaThrottlesAlarm", "Throttles")):
        alarm = _resource(name, "AWS::CloudWatch::Alarm")
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", metric)
        assert alarm["Dimensions"] == [
            {"Name": "FunctionName", "Value": {"Ref": "GatewayFunction"}},
            {"Name": "Resource", "Value": alias},
        ]
    stack = Stack(TEMPLATE_JSON, "gw")
    function = stack.resolve({"Ref": "GatewayFunction"})
    dashboard = json.loads(stack.resources()["Dashboard"]["Properties"]["DashboardBody"])
    charted = [
        metric
        for widget in dashboard["widgets"]
        for metric in widget["properties"].get("metrics", [])
        if metric[0] == "AWS/Lambda"
    ]
    assert charted
    for metric in charted:
        assert metric[2:6] == ["FunctionName", function, "Resource", f"{function}:live"]


def test_architecture_is_a_parameter_graviton_by_default() -> None:
    param = PARAMETERS["Architecture"]
    assert param["Default"] == "arm64"
    assert set(param["AllowedValues"]) == set(ADAPTER_LAYER_NAMES)
    layer = RESOURCES["PoliciesLayer"]
    assert layer["Properties"]["CompatibleArchitectures"] == [{"Ref": "Architecture"}]
    assert layer["Metadata"]["BuildArchitecture"] == {"Ref": "Architecture"}
    # The build takes the architecture from the Makefile's directory: SAM passes
    # make nothing else that names it (release/lambda.mk).
    for logical_id in ("GatewayFunction", "PoliciesLayer", "BreakerFunction"):
        metadata = RESOURCES[logical_id]["Metadata"]
        assert metadata["BuildMethod"] == "makefile"
        assert metadata["ContextPath"] == {"Fn::Sub": "release/${Architecture}"}
    for arch in param["AllowedValues"]:
        makefile = (ROOT / "release" / arch / "Makefile").read_text()
        assert f"ARCH := {arch}\n" in makefile


def test_samconfig_builds_and_deploys_the_same_architecture() -> None:
    default = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]

    def architecture(command: str) -> str:
        overrides = default[command]["parameters"]["parameter_overrides"]
        (value,) = [e.split("=", 1)[1] for e in overrides if e.startswith("Architecture=")]
        return str(value)

    assert architecture("build") == architecture("deploy") == _parameter_default("Architecture")


def test_web_adapter_layer_is_pinned_and_configured() -> None:
    fn = _function()
    assert TEMPLATE_JSON["Conditions"]["IsArm64"] == {
        "Fn::Equals": [{"Ref": "Architecture"}, "arm64"]
    }
    (adapter,) = [layer["Fn::If"] for layer in fn["Layers"] if "Fn::If" in layer]
    condition, arm64, x86_64 = adapter
    assert condition == "IsArm64"
    versions = set()
    for arch, arn in (("arm64", arm64), ("x86_64", x86_64)):
        match = ADAPTER_LAYER.fullmatch(arn["Fn::Sub"])
        assert match, arn
        assert match.group(1) == ADAPTER_LAYER_NAMES[arch]
        versions.add(int(match.group(2)))
    # One adapter release for both architectures (v1.1.0 is version 30 of each).
    assert versions == {30}
    env = _env()
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/healthz"
    assert env["PYTHONUNBUFFERED"] == "1"
    # run.sh listens on AWS_LWA_PORT; the adapter forwards to the same variable.
    assert env["AWS_LWA_PORT"].isdigit()
    run_sh = (ROOT / fn["CodeUri"] / "run.sh").read_text()
    assert "AWS_LWA_PORT" in run_sh


def test_shell_scripts_are_checked_out_with_lf_endings() -> None:
    """A Windows checkout must not ship a run.sh the adapter cannot exec."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout

    scripts = git("ls-files", "*.sh").split()
    assert "functions/gateway/run.sh" in scripts
    result = git("check-attr", "eol", "text", "--", *scripts)
    attributes = {tuple(line.rsplit(": ", 2)) for line in result.splitlines()}
    for script in scripts:
        assert (script, "eol", "lf") in attributes, result
        assert (script, "text", "set") in attributes, result
        assert b"\r" not in (ROOT / script).read_bytes(), script


def test_the_deploy_guide_checks_the_adapter_version_the_template_pins() -> None:
    pinned = re.compile(r"LambdaAdapterLayer(?:X86|Arm64):(\d+)")
    in_template = set(pinned.findall(TEMPLATE.read_text()))
    guide = (ROOT / "docs" / "deploy.md").read_text()
    assert "aws lambda get-layer-version-by-arn" in guide
    assert in_template
    assert set(pinned.findall(guide)) == in_template
    # The China regions' adapter accounts, as the adapter's documentation lists them.
    for region, account in (("cn-north-1", "041581134020"), ("cn-northwest-1", "069767869989")):
        assert region in guide
        assert account in guide


def test_policies_layer_is_built_and_attached() -> None:
    layer = _resource("PoliciesLayer", "AWS::Serverless::LayerVersion")
    assert layer["CompatibleRuntimes"] == ["python3.13"]
    assert layer["CompatibleArchitectures"] == _function()["Architectures"]
    content = ROOT / layer["ContentUri"]
    assert (content / "gateway_policies" / "__init__.py").is_file()
    assert {"Ref": "PoliciesLayer"} in _function()["Layers"]


# ------------------------------------------------------ names shared with code


def test_environment_uses_the_names_settings_reads() -> None:
    env = _env()
    assert _ref(env[settings.ENV_SERVICE_NAME]) == "AWS::StackName"
    assert env[settings.ENV_METRICS_NAMESPACE] == names.METRICS_NAMESPACE
    assert float(env[settings.ENV_FLAG_TTL]) == settings.DEFAULT_FLAG_TTL
    assert float(env[settings.ENV_POLICY_CONFIG_TTL]) == settings.DEFAULT_POLICY_CONFIG_TTL
    assert _ref(env[settings.ENV_UPSTREAM_BASE_URL]) == "UpstreamBaseUrl"
    assert _parameter_default("UpstreamBaseUrl") == settings.DEFAULT_UPSTREAM_BASE_URL
    assert _ref(env[settings.ENV_AUTH_MODE]) == "AuthMode"
    assert _ref(env[settings.ENV_GATEWAY_KEYS_SECRET]) == "GatewayKeysSecret"
    assert env[settings.ENV_UPSTREAM_API_KEY_SECRET] == _if_anthropic(
        {"Ref": "UpstreamApiKeySecret"}
    )
    assert _ref(env[settings.ENV_ALLOW_FILES_API]) == "AllowFilesApi"
    assert _parameter_default("AllowFilesApi") == str(settings.DEFAULT_ALLOW_FILES_API).lower()
    assert _ref(env[settings.ENV_GATEWAY_PUBLIC_URL]) == "GatewayPublicUrl"
    assert _parameter_default("GatewayPublicUrl") == ""
    assert _ref(env[settings.ENV_UPSTREAM_PROVIDER]) == "UpstreamProvider"
    assert _ref(env[settings.ENV_BEDROCK_MODEL_MAP]) == "BedrockModelMap"
    assert env[settings.ENV_BEDROCK_REGION] == {
        "Fn::If": ["HasBedrockRegion", {"Ref": "BedrockRegion"}, {"Ref": "AWS::Region"}]
    }
    # Every other variable must be a name the code knows: a typo here would be
    # silently ignored at run time.
    known = {
        value
        for module in (settings, tracing_settings)
        for name, value in vars(module).items()
        if name.startswith("ENV_") and isinstance(value, str)
    }
    assert set(env) - PLATFORM_ENV <= known


def test_the_default_stack_has_exactly_the_code_defaults() -> None:
    """samconfig.toml's stack, policy-gateway, emits what a local run emits."""
    stack = Stack(TEMPLATE_JSON, names.SERVICE_NAME)
    env = stack.resources()["GatewayFunction"]["Properties"]["Environment"]["Variables"]
    assert env[settings.ENV_SERVICE_NAME] == names.SERVICE_NAME
    assert env[settings.ENV_FLAG_PARAMETER] == settings.DEFAULT_FLAG_PARAMETER
    assert env[settings.ENV_POLICY_CONFIG_PARAMETER] == settings.DEFAULT_POLICY_CONFIG_PARAMETER
    outputs = stack.outputs()
    assert outputs["FlagParameterName"] == settings.DEFAULT_FLAG_PARAMETER
    assert outputs["PolicyConfigParameterName"] == settings.DEFAULT_POLICY_CONFIG_PARAMETER


def test_parameter_names_can_be_given_and_must_start_with_a_slash() -> None:
    given = {
        "FlagParameterName": "/team/gw/flag",
        "PolicyConfigParameterName": "/team/gw/chain",
    }
    stack = Stack(TEMPLATE_JSON, "gw", parameters=given)
    env = stack.resources()["GatewayFunction"]["Properties"]["Environment"]["Variables"]
    assert env[settings.ENV_FLAG_PARAMETER] == "/team/gw/flag"
    assert env[settings.ENV_POLICY_CONFIG_PARAMETER] == "/team/gw/chain"
    assert stack.outputs()["FlagParameterName"] == "/team/gw/flag"
    assert "--name /team/gw/flag " in stack.outputs()["FlagToggleCommand"]
    # The IAM ARNs are built as "parameter${Name}", which is right only for names
    # that start with a slash; empty means "derive it from the stack name".
    for name in given:
        pattern = PARAMETERS[name]["AllowedPattern"]
        assert _parameter_default(name) == ""
        assert re.fullmatch(pattern, "")
        assert re.fullmatch(pattern, given[name])
        assert not re.fullmatch(pattern, "no-leading-slash")


# ------------------------------------------- live values the stack never owns

LIVE_VALUE_ENV = (settings.ENV_FLAG_PARAMETER, settings.ENV_POLICY_CONFIG_PARAMETER)


def _live_value_names(stack: Stack) -> set[str]:
    env = stack.resources()["GatewayFunction"]["Properties"]["Environment"]["Variables"]
    return {env[key] for key in LIVE_VALUE_ENV}


@pytest.mark.parametrize(
    "parameters",
    [{}, {"FlagParameterName": "/x/flag", "PolicyConfigParameterName": "/x/chain"}],
    ids=["derived-names", "given-names"],
)
def test_no_deploy_can_write_the_live_flag_or_chain(parameters: dict[str, str]) -> None:
    """CloudFormation must not own the flag or the chain.

    A parameter the stack declares gets the template's value written back
    whenever that resource is updated for any reason (a description, a tag),
    which silently turns the fallback off and empties the policy chain.
    Neither an SSM parameter resource nor a custom resource may name them.
    """
    stack = Stack(TEMPLATE_JSON, "gw-live", parameters=parameters)
    live = _live_value_names(stack)
    assert len(live) == 2
    for logical_id, resource in stack.resources().items():
        props = resource["Properties"]
        if resource["Type"] == "AWS::SSM::Parameter":
            assert props.get("Name") not in live, f"{logical_id} would own a live value"
            assert "Name" in props, f"{logical_id}: an unnamed SSM parameter hides what it is"
        if resource["Type"].startswith("Custom::") or resource["Type"] in (
            "AWS::CloudFormation::CustomResource",
            "AWS::SSM::Association",
        ):
            mentioned = json.dumps(props)
            assert not any(name in mentioned for name in live), f"{logical_id} writes {live}"


def test_the_gateway_may_only_read_the_live_values() -> None:
    stack = Stack(TEMPLATE_JSON, "gw-iam")
    live_arns = {
        f"arn:aws:ssm:us-east-1:123456789012:parameter{name}" for name in _live_value_names(stack)
    }
    role_statements = _function()["Policies"]
    actions = {
        action
        for policy in stack.resolve(role_statements)
        for statement in policy["Statement"]
        for action in (
            [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        )
        if set(statement["Resource"] if isinstance(statement["Resource"], list) else
               [statement["Resource"]]) & live_arns
    }  # fmt: skip
    # One GetParameters call reads both (policy_gateway/parameter_batch.py).
    assert actions == {"ssm:GetParameters"}


# ---------------------------------------------------------- stack identity

STACK_NAMES = ("prod-gateway", "staging-gateway")
# Properties that name a resource; MetricName is the metric, whose identity is
# namespace + name + dimensions (checked separately).
NAMING_PROPERTY = re.compile(r"^(Name|[A-Za-z]+Name)$")
SHARED_BY_DESIGN = {"MetricName"}


def _named(stack: Stack) -> dict[str, str]:
    """Every name the stack gives a resource, keyed by where it is."""
    found: dict[str, str] = {}
    for logical_id, resource in stack.resources().items():
        for key, value in resource["Properties"].items():
            named = NAMING_PROPERTY.match(key) and key not in SHARED_BY_DESIGN
            if named and isinstance(value, str):
                found[f"{logical_id}.{key}"] = value
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        for key in (settings.ENV_SERVICE_NAME, *LIVE_VALUE_ENV):
            if key in variables:
                found[f"{logical_id}.env.{key}"] = variables[key]
    return found


def _watched_services(stack: Stack) -> dict[str, list[str]]:
    """For each alarm and dashboard, the service dimension values it watches."""
    watched: dict[str, list[str]] = {}
    for logical_id, resource in stack.resources().items():
        props = resource["Properties"]
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            metrics = [props] + [
                query["MetricStat"]["Metric"]
                for query in props.get("Metrics", [])
                if "MetricStat" in query
            ]
            for metric in metrics:
                if metric.get("Namespace") != names.METRICS_NAMESPACE:
                    continue
                assert [d["Name"] for d in metric["Dimensions"]] == [
                    names.METRICS_SERVICE_DIMENSION
                ], f"{logical_id}: the code emits exactly the dimension set [service]"
                watched.setdefault(logical_id, []).append(metric["Dimensions"][0]["Value"])
        if resource["Type"] == "AWS::CloudWatch::Dashboard":
            for widget in json.loads(props["DashboardBody"])["widgets"]:
                for metric in widget["properties"].get("metrics", []):
                    if metric[0] != names.METRICS_NAMESPACE:
                        continue
                    dims = [part for part in metric[2:] if isinstance(part, str)]
                    assert dims[0] == names.METRICS_SERVICE_DIMENSION, metric
                    watched.setdefault(logical_id, []).append(dims[1])
    return watched


def test_two_stacks_share_no_metric_identity_and_no_name() -> None:
    stacks = [Stack(TEMPLATE_JSON, name) for name in STACK_NAMES]
    for stack in stacks:
        env = stack.resources()["GatewayFunction"]["Properties"]["Environment"]["Variables"]
        emitted = env[settings.ENV_SERVICE_NAME]
        assert emitted == stack.name
        watched = _watched_services(stack)
        assert "PassthroughFallbackAlarm" in watched
        assert "Dashboard" in watched
        for where, services in watched.items():
            assert set(services) == {emitted}, f"{stack.name}: {where} watches {services}"
    first, second = (_named(stack) for stack in stacks)
    assert set(first) == set(second)
    shared = {where: value for where, value in first.items() if second[where] == value}
    assert not shared, f"two stacks would share {shared}"


def test_the_emitted_dimension_is_what_that_stacks_alarm_watches(
    tmp_path: Path, upstream: FakeUpstream, upstream_url: str, ssm: Any
) -> None:
    """Run the gateway with the environment the template gives stack
    `staging-gateway`, make it fall back, and compare its EMF line with that
    stack's alarm."""
    stack = Stack(TEMPLATE_JSON, STACK_NAMES[1])
    resources = stack.resources()
    template_env = resources["GatewayFunction"]["Properties"]["Environment"]["Variables"]
    identity = {
        key: template_env[key]
        for key in (settings.ENV_SERVICE_NAME, settings.ENV_METRICS_NAMESPACE, *LIVE_VALUE_ENV)
    }
    ssm.put_parameter(
        Name=identity[settings.ENV_FLAG_PARAMETER], Value="true", Type="String", Overwrite=True
    )
    ssm.put_parameter(
        Name=identity[settings.ENV_POLICY_CONFIG_PARAMETER],
        Value=REPLACE,
        Type="String",
        Overwrite=True,
    )
    env = {
        **identity,
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        "PYTHONPATH": str(ROOT),
    }
    stdout = tmp_path / "gateway.out"
    with gateway_process(env, stdout_path=stdout) as (url, _):
        upstream.script(Reply.error(400, "invalid_request_error"))
        assert ask_text(sdk(url)).startswith("echo:")
        # The call's metrics are printed after its answer is sent.
        eventually(lambda: names.METRIC_REQUESTS in stdout.read_text())
    (emf,) = [line for line in json_lines(stdout.read_text()) if names.METRIC_FALLBACK in line]
    directive = emf["_aws"]["CloudWatchMetrics"][0]
    alarm = resources["PassthroughFallbackAlarm"]["Properties"]
    assert directive["Namespace"] == alarm["Namespace"]
    assert {"Name": alarm["MetricName"], "Unit": "Count"} in directive["Metrics"]
    assert directive["Dimensions"] == [[d["Name"] for d in alarm["Dimensions"]]]
    assert {d["Name"]: emf[d["Name"]] for d in alarm["Dimensions"]} == {
        d["Name"]: d["Value"] for d in alarm["Dimensions"]
    }
    assert emf[names.METRICS_SERVICE_DIMENSION] == "staging-gateway"


def test_alarm_watches_exactly_the_emitted_fallback_metric() -> None:
    alarm = _resource("PassthroughFallbackAlarm", "AWS::CloudWatch::Alarm")
    assert alarm["Namespace"] == names.METRICS_NAMESPACE
    assert alarm["MetricName"] == names.METRIC_FALLBACK
    assert alarm["Dimensions"] == [
        {"Name": names.METRICS_SERVICE_DIMENSION, "Value": {"Ref": "AWS::StackName"}}
    ]
    assert alarm["Statistic"] == "Sum"
    assert alarm["Period"] == 300
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    notify = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
    assert alarm["AlarmActions"] == notify


def test_alarm_topic_and_subscription_only_with_an_email() -> None:
    assert TEMPLATE_JSON["Conditions"]["HasAlarmEmail"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]
    }
    assert _parameter_default("AlarmEmail") == ""
    # The topic always exists (the breaker reports there); only the e-mail is optional.
    assert "Condition" not in RESOURCES["AlarmTopic"]
    subscription = RESOURCES["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Protocol"] == "email"
    assert _ref(subscription["Properties"]["Endpoint"]) == "AlarmEmail"


def test_dashboard_charts_every_metric_with_the_emitted_dimension() -> None:
    stack = Stack(TEMPLATE_JSON, names.SERVICE_NAME)
    dashboard = json.loads(stack.resources()["Dashboard"]["Properties"]["DashboardBody"])
    charted: dict[str, set[str]] = {}
    for widget in dashboard["widgets"]:
        properties = widget["properties"]
        for metric in properties.get("metrics", []):
            if metric[0] != names.METRICS_NAMESPACE:
                continue
            name = metric[1]
            dims = [part for part in metric[2:] if isinstance(part, str)]
            assert dims == [names.METRICS_SERVICE_DIMENSION, names.SERVICE_NAME], metric
            options = metric[-1] if isinstance(metric[-1], dict) else {}
            charted.setdefault(name, set()).add(options.get("stat") or properties.get("stat"))
    assert set(charted) == _metric_names()
    for name in (names.METRIC_LATENCY, names.METRIC_TIME_TO_FIRST_EVENT):
        assert {"p50", "p99"} <= charted[name]
    for name in (
        names.METRIC_REQUESTS,
        names.METRIC_UPSTREAM_4XX,
        names.METRIC_UPSTREAM_5XX,
        names.METRIC_FALLBACK,
        names.METRIC_FALLBACK_SUCCEEDED,
        names.METRIC_FALLBACK_FAILED,
    ):
        assert charted[name] == {"Sum"}
    # The oldest chain version any environment still runs: it falls once a change has
    # reached them all.
    assert charted[names.METRIC_CHAIN_VERSION_AGE] == {"Maximum"}


def _searches(stack: Stack) -> dict[str, str]:
    """The dashboard's SEARCH expressions, by the metric they name."""
    dashboard = json.loads(stack.resources()["Dashboard"]["Properties"]["DashboardBody"])
    found: dict[str, str] = {}
    for widget in dashboard["widgets"]:
        for metric in widget["properties"].get("metrics", []):
            expression = metric[0].get("expression", "") if isinstance(metric[0], dict) else ""
            named = re.search(r'MetricName="([A-Za-z0-9]+)"', expression)
            if named:
                found.setdefault(named.group(1), "")
                found[named.group(1)] += expression
    return found


def test_the_dashboard_searches_the_audit_metrics_by_their_emitted_dimensions() -> None:
    stack = Stack(TEMPLATE_JSON, "prod-gateway")
    searches = _searches(stack)
    assert set(searches) == set(names.DIMENSIONED_METRICS)
    for metric, dimensions in names.DIMENSIONED_METRICS.items():
        schema = ",".join([names.METRICS_NAMESPACE, names.METRICS_SERVICE_DIMENSION, *dimensions])
        assert "{" + schema + "}" in searches[metric], metric
        assert f'{names.METRICS_SERVICE_DIMENSION}="prod-gateway"' in searches[metric]
    # What a shadow-mode policy would have done is charted too, under its own set.
    shadow = f"{names.DIMENSION_POLICY},{names.DIMENSION_ACTION},{names.DIMENSION_MODE}}}"
    assert shadow in searches[names.METRIC_POLICY_ACTIONS]


QUIET_ALARMS = {
    "PolicyConfigErrorsAlarm": (names.METRICS_NAMESPACE, names.METRIC_POLICY_CONFIG_ERRORS),
    "PolicyErrorsAlarm": (names.METRICS_NAMESPACE, names.METRIC_POLICY_ERRORS),
    "LambdaErrorsAlarm": ("AWS/Lambda", "Errors"),
    "LambdaThrottlesAlarm": ("AWS/Lambda", "Throttles"),
}


def test_alarms_watch_what_breaks_quietly_each_with_its_runbook() -> None:
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    notify = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
    for logical_id, (namespace, metric) in QUIET_ALARMS.items():
        alarm = _resource(logical_id, "AWS::CloudWatch::Alarm")
        assert (alarm["Namespace"], alarm["MetricName"]) == (namespace, metric)
        assert alarm["AlarmActions"] == notify
        assert f"## Runbook: {alarm['AlarmName']['Fn::Sub'].split('-', 1)[1]}" in deploy
    rate = _resource("ServerErrorRateAlarm", "AWS::CloudWatch::Alarm")
    watched = {
        query["Id"]: query["MetricStat"]["Metric"]["MetricName"]
        for query in rate["Metrics"]
        if "MetricStat" in query
    }
    assert watched == {"errors": names.METRIC_RESPONSES_5XX, "requests": names.METRIC_REQUESTS}
    assert "## Runbook: 5xx-rate" in deploy
    assert rate["AlarmActions"] == notify


# ------------------------------------------------------------------------ IAM


BEDROCK_ACTIONS = [
    "bedrock:InvokeModel",
    "bedrock:InvokeModelWithResponseStream",
    "bedrock:CountTokens",
]


RECORD_OBJECTS = {"Fn::Sub": "${RecordsBucket.Arn}/*"}


def test_iam_is_scoped_to_the_two_parameters_the_two_secrets_and_the_budget_table() -> None:
    policies = _function()["Policies"]
    # Only inline statements: SAM policy templates such as SSMParameterReadPolicy
    # add ssm:DescribeParameters on "*".
    assert all(isinstance(p, dict) and set(p) == {"Statement"} for p in policies)
    statements = [s for p in policies for s in p["Statement"] if "Fn::If" not in s]
    by_service: dict[str, list[Any]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        assert "*" not in json.dumps(actions), statement
        # Any key of the records bucket (issue 43), and only of it.
        assert "*" not in json.dumps([r for r in resources if r != RECORD_OBJECTS]), statement
        for action in actions:
            by_service.setdefault(action, []).extend(resources)
    assert set(by_service) == {
        "ssm:GetParameters",
        "secretsmanager:GetSecretValue",
        "dynamodb:UpdateItem",
        "s3:PutObject",
    }
    # Records are put, never read back, by the gateway (`policy-gateway history` reads them).
    assert by_service["s3:PutObject"] == [RECORD_OBJECTS]
    # One write action on the budget table; reading it is the operator's (the CLI).
    assert by_service["dynamodb:UpdateItem"] == [{"Fn::GetAtt": ["FallbackBudgetTable", "Arn"]}]
    stack = Stack(TEMPLATE_JSON, names.SERVICE_NAME)
    assert sorted(stack.resolve(by_service["ssm:GetParameters"])) == sorted(
        f"arn:aws:ssm:us-east-1:123456789012:parameter{name}"
        for name in (settings.DEFAULT_FLAG_PARAMETER, settings.DEFAULT_POLICY_CONFIG_PARAMETER)
    )
    assert by_service["secretsmanager:GetSecretValue"] == [
        {"Ref": "GatewayKeysSecret"},
        _if_anthropic({"Ref": "UpstreamApiKeySecret"}),
    ]


def test_bedrock_mode_grants_claude_inference_and_needs_no_anthropic_key() -> None:
    assert PARAMETERS["UpstreamProvider"]["Default"] == settings.DEFAULT_UPSTREAM_PROVIDER
    assert set(PARAMETERS["UpstreamProvider"]["AllowedValues"]) == set(settings.UPSTREAM_PROVIDERS)
    assert json.loads(_parameter_default("BedrockModelMap")) == {}
    conditional = {
        s["Fn::If"][0]: s["Fn::If"][1:]
        for p in _function()["Policies"]
        for s in p["Statement"]
        if "Fn::If" in s
    }
    # The others are the KMS keys' (test_the_kms_key_encrypts_..., the records' own key:
    # test_template_records.py) and the judge's grant
    # (test_a_bedrock_judge_may_invoke_its_model_and_only_that).
    assert set(conditional) == {"UsesBedrock", "JudgesOnBedrock", "HasKmsKey", "HasNoKmsKey"}
    statement, otherwise = conditional["UsesBedrock"]
    assert otherwise == {"Ref": "AWS::NoValue"}
    assert TEMPLATE_JSON["Conditions"]["UsesBedrock"] == {
        "Fn::Equals": [{"Ref": "UpstreamProvider"}, settings.PROVIDER_BEDROCK]
    }
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == BEDROCK_ACTIONS
    # Anthropic models only: every resource names them (or this account's profiles).
    resources = [r["Fn::Sub"] for r in statement["Resource"]]
    assert resources == [
        "arn:${AWS::Partition}:bedrock:*::foundation-model/anthropic.*",
        "arn:${AWS::Partition}:bedrock:*:${AWS::AccountId}:inference-profile/*anthropic.*",
        "arn:${AWS::Partition}:bedrock:*:${AWS::AccountId}:application-inference-profile/*",
    ]
    # No Anthropic key in bedrock mode: the secret and its outputs exist only for anthropic.
    assert RESOURCES["UpstreamApiKeySecret"]["Condition"] == "UsesAnthropic"
    assert OUTPUTS["UpstreamApiKeySecretArn"]["Condition"] == "UsesAnthropic"
    assert OUTPUTS["UpstreamApiKeyPutCommand"]["Condition"] == "UsesAnthropic"
    # A public URL must not relay unauthenticated callers to Bedrock.
    rule = TEMPLATE_JSON["Rules"]["BedrockNeedsAnAuthenticatedCaller"]
    assert rule["RuleCondition"] == {
        "Fn::Equals": [{"Ref": "UpstreamProvider"}, settings.PROVIDER_BEDROCK]
    }
    assert settings.AUTH_PASSTHROUGH in json.dumps(rule["Assertions"])


def _bedrock_grants(stack: Stack) -> list[Json]:
    statements = [s for p in stack.resolve(_function()["Policies"]) for s in p["Statement"]]
    return [s for s in statements if "bedrock" in json.dumps(s["Action"])]


@pytest.mark.parametrize(
    ("model", "foundation_model"),
    [
        (
            "us.anthropic.claude-haiku-4-5-20251001-v1:0",
            "anthropic.claude-haiku-4-5-20251001-v1:0",
        ),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "anthropic.claude-3-5-haiku-20241022-v1:0"),
    ],
)
def test_a_bedrock_judge_may_invoke_its_model_and_only_that(
    model: str, foundation_model: str
) -> None:
    # No chain names a Bedrock judge: no grant at all (the default stack relays to Anthropic).
    assert _bedrock_grants(Stack(TEMPLATE_JSON, "gw")) == []
    stack = Stack(TEMPLATE_JSON, "gw", parameters={"JudgeBedrockModel": model})
    (grant,) = _bedrock_grants(stack)
    assert grant == {
        "Sid": "InvokeTheJudgeOnBedrock",
        "Effect": "Allow",
        "Action": "bedrock:InvokeModel",
        "Resource": [
            f"arn:aws:bedrock:*::foundation-model/{foundation_model}",
            f"arn:aws:bedrock:*:123456789012:inference-profile/{model}",
        ],
    }
    # A Bedrock upstream keeps its own grant beside the judge's.
    both = Stack(
        TEMPLATE_JSON, "gw", parameters={"JudgeBedrockModel": model, "UpstreamProvider": "bedrock"}
    )
    assert [g["Sid"] for g in _bedrock_grants(both)] == [
        "InvokeClaudeOnBedrock",
        "InvokeTheJudgeOnBedrock",
    ]


def test_the_judge_model_parameter_takes_claude_model_ids_only() -> None:
    pattern = re.compile(PARAMETERS["JudgeBedrockModel"]["AllowedPattern"])
    assert _parameter_default("JudgeBedrockModel") == ""
    for accepted in ("", "anthropic.claude-x-v1:0", "global.anthropic.claude-haiku-4-5-v1:0"):
        assert pattern.fullmatch(accepted), accepted
    # A wildcard or another vendor's model would widen the grant past the judge's model.
    for refused in ("*", "anthropic.*", "meta.llama3-70b-instruct-v1:0", "us.anthropic.x/../y"):
        assert not pattern.fullmatch(refused), refused


def test_secrets_and_auth_mode() -> None:
    param = PARAMETERS["AuthMode"]
    assert param["Default"] == "gateway_key"
    assert set(param["AllowedValues"]) == {"passthrough", "gateway_key"}

    keys = _resource("GatewayKeysSecret", "AWS::SecretsManager::Secret")
    generate = keys["GenerateSecretString"]
    # Generated value: {"name": "default", "key": "<random>"} (see docs/deploy.md).
    assert json.loads(generate["SecretStringTemplate"]) == {"name": "default"}
    assert generate["GenerateStringKey"] == "key"
    assert generate["ExcludePunctuation"] is True
    assert generate["PasswordLength"] >= 32

    upstream = _resource("UpstreamApiKeySecret", "AWS::SecretsManager::Secret")
    # Created empty: the operator stores the Anthropic key; never in the template.
    assert "SecretString" not in upstream
    assert "GenerateSecretString" not in upstream


def test_outputs_tell_the_operator_what_to_do() -> None:
    assert OUTPUTS["FunctionUrl"]["Value"] == {"Fn::GetAtt": ["GatewayFunctionUrl", "FunctionUrl"]}
    outputs = Stack(TEMPLATE_JSON, "gw").outputs()
    assert outputs["InitCommand"] == "policy-gateway init --stack gw --region us-east-1"
    assert outputs["DoctorCommand"] == "policy-gateway doctor --stack gw --region us-east-1"
    toggle = outputs["FlagToggleCommand"]
    assert "policy-gateway flag on" in toggle
    assert "aws ssm put-parameter" in toggle
    read_key = OUTPUTS["GatewayKeyReadCommand"]["Value"]["Fn::Sub"]
    assert "aws secretsmanager get-secret-value" in read_key
    assert "${GatewayKeysSecret}" in read_key
    put_key = OUTPUTS["UpstreamApiKeyPutCommand"]["Value"]["Fn::Sub"]
    assert "aws secretsmanager put-secret-value" in put_key
    assert "${UpstreamApiKeySecret}" in put_key


# ------------------------------------------------------------------- samconfig


def test_samconfig_defaults_deploy_this_template() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    default = config["default"]
    assert default["global"]["parameters"]["stack_name"] == "policy-gateway"
    deploy = default["deploy"]["parameters"]
    assert deploy["resolve_s3"] is True
    assert "CAPABILITY_IAM" in deploy["capabilities"].split()
    assert deploy["confirm_changeset"] is True
    overrides = deploy["parameter_overrides"]
    entries = overrides if isinstance(overrides, list) else overrides.split()
    assert entries
    for entry in entries:
        key, sep, value = entry.partition("=")
        assert sep, entry
        assert value, f"{entry!r}: SAM rejects an empty override"
        assert key in PARAMETERS, f"{key} is not a template parameter"
        allowed = PARAMETERS[key].get("AllowedValues")
        if allowed is not None:
            assert value in [str(v) for v in allowed], entry
        pattern = PARAMETERS[key].get("AllowedPattern")
        if pattern is not None:
            assert re.fullmatch(pattern, value), entry


# ---------------------------------------------------------------------- events


BODY_FOR_EVENT = {
    "function-url-nonstreaming.json": "nonstreaming.json",
    "function-url-streaming.json": "streaming.json",
    "function-url-fallback.json": "fallback.json",
    "function-url-count-tokens.json": "count_tokens.json",
}


def _read_json(path: Path) -> Json:
    loaded = json.loads(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("name", sorted(BODY_FOR_EVENT))
def test_function_url_events_carry_the_sample_bodies(name: str) -> None:
    event = _read_json(EVENTS / name)
    assert event["version"] == "2.0"
    assert event["isBase64Encoded"] is False
    http = event["requestContext"]["http"]
    assert http["method"] == "POST"
    assert http["path"] == event["rawPath"]
    assert event["rawPath"].startswith("/v1/messages")
    headers = event["headers"]
    assert all(key == key.lower() for key in headers)
    assert headers["content-type"] == "application/json"
    assert headers["anthropic-version"]
    assert int(headers["content-length"]) == len(event["body"].encode())
    assert re.fullmatch(r"Root=1-[0-9a-f]{8}-[0-9a-f]{24}(;.*)?", headers["x-amzn-trace-id"])
    body = json.loads(event["body"])
    assert body == _read_json(EVENTS / "bodies" / BODY_FOR_EVENT[name])
    streaming = body.get("stream") is True
    assert (headers["accept"] == "text/event-stream") == streaming


@pytest.mark.parametrize("name", ["nonstreaming.json", "streaming.json", "fallback.json"])
def test_bodies_are_messages_requests(name: str) -> None:
    body = _read_json(EVENTS / "bodies" / name)
    assert body["model"] == "claude-sonnet-4-6"
    assert isinstance(body["max_tokens"], int)
    assert body["max_tokens"] > 0
    messages = body["messages"]
    assert messages
    assert messages[0]["role"] == "user"
    assert body.get("stream", False) is (name != "nonstreaming.json")


def test_count_tokens_body_has_no_generation_settings() -> None:
    body = _read_json(EVENTS / "bodies" / "count_tokens.json")
    assert body["model"] == "claude-sonnet-4-6"
    assert body["messages"]
    assert "max_tokens" not in body
    assert "stream" not in body


# What the demo chains do to the demo body: tests/test_fallback.py, through the gateway.
@pytest.mark.parametrize("name", sorted(p.name for p in (EVENTS / "policies").glob("*.json")))
def test_sample_policy_chains_load(name: str) -> None:
    load_chain((EVENTS / "policies" / name).read_text())


# ---------------------------------------------------------------------- linters


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} not found next to {sys.executable}; install the dev extras"
    return str(path)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    return subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.cfn_lint
def test_cfn_lint_passes() -> None:
    result = _run([_tool("cfn-lint"), str(TEMPLATE)])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.cfn_lint
def test_sam_validate_lint_passes() -> None:
    result = _run([_tool("sam"), "validate", "--lint", "--template-file", str(TEMPLATE)])
    assert result.returncode == 0, result.stdout + result.stderr


# ------------------------------------------------------ fallback abuse (issue 11)


def _statements(props: Json) -> dict[str, list[Any]]:
    """Action -> resources of a SAM function's inline policy statements, all Allow."""
    by_action: dict[str, list[Any]] = {}
    for policy in props["Policies"]:
        assert set(policy) == {"Statement"}
        for statement in policy["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"]
            resources = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                by_action.setdefault(action, []).extend(
                    resources if isinstance(resources, list) else [resources]
                )
    return by_action


def test_budget_table_is_on_demand_with_ttl_and_the_codes_key() -> None:
    table = _resource("FallbackBudgetTable", "AWS::DynamoDB::Table")
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["TableName"] == {"Fn::Sub": "${AWS::StackName}-fallback-budget"}
    assert table["KeySchema"] == [{"AttributeName": budget_table.KEY_ATTRIBUTE, "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [
        {"AttributeName": budget_table.KEY_ATTRIBUTE, "AttributeType": "S"}
    ]
    assert table["TimeToLiveSpecification"] == {
        "AttributeName": budget_table.TTL_ATTRIBUTE,
        "Enabled": True,
    }
    env = _env()
    assert _ref(env[settings.ENV_FALLBACK_BUDGET_TABLE]) == "FallbackBudgetTable"
    assert _ref(env[settings.ENV_FALLBACK_BUDGET]) == "FallbackBudget"
    assert _ref(env[settings.ENV_FALLBACK_BUDGET_WINDOW]) == "FallbackBudgetWindowSeconds"
    assert int(_parameter_default("FallbackBudget")) == settings.DEFAULT_FALLBACK_BUDGET
    assert PARAMETERS["FallbackBudget"]["MinValue"] == 0
    assert (
        int(_parameter_default("FallbackBudgetWindowSeconds"))
        == settings.DEFAULT_FALLBACK_BUDGET_WINDOW
    )


def test_surge_alarm_watches_the_fallback_metric_and_invokes_the_breaker() -> None:
    alarm = _resource("FallbackSurgeAlarm", "AWS::CloudWatch::Alarm")
    assert alarm["AlarmName"] == {"Fn::Sub": "${AWS::StackName}-fallback-surge"}
    assert alarm["Namespace"] == names.METRICS_NAMESPACE
    assert alarm["MetricName"] == names.METRIC_FALLBACK
    # Per-stack service identity: the dimension is the stack's name.
    assert alarm["Dimensions"] == [
        {"Name": names.METRICS_SERVICE_DIMENSION, "Value": {"Ref": "AWS::StackName"}}
    ]
    assert alarm["Statistic"] == "Sum"
    assert _ref(alarm["Period"]) == "FallbackSurgePeriodSeconds"
    assert _ref(alarm["Threshold"]) == "FallbackSurgeThreshold"
    assert int(_parameter_default("FallbackSurgePeriodSeconds")) == 300
    assert int(_parameter_default("FallbackSurgeThreshold")) == 50
    assert all(
        int(period) in (10, 30) or int(period) % 60 == 0
        for period in PARAMETERS["FallbackSurgePeriodSeconds"]["AllowedValues"]
    )
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    # A Lambda alarm action is the function's ARN.
    assert alarm["AlarmActions"] == [{"Fn::GetAtt": ["BreakerFunction", "Arn"]}]


def test_only_the_surge_alarm_may_invoke_the_breaker() -> None:
    permissions = [
        resource["Properties"]
        for resource in RESOURCES.values()
        if resource["Type"] == "AWS::Lambda::Permission"
        and resource["Properties"]["FunctionName"] == {"Ref": "BreakerFunction"}
    ]
    assert permissions == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Ref": "BreakerFunction"},
            "Principal": "lambda.alarms.cloudwatch.amazonaws.com",
            "SourceAccount": {"Ref": "AWS::AccountId"},
            "SourceArn": {"Fn::GetAtt": ["FallbackSurgeAlarm", "Arn"]},
        }
    ]


def test_breaker_function_is_least_privilege_and_reads_the_gateways_names() -> None:
    fn = _resource("BreakerFunction", "AWS::Serverless::Function")
    assert fn["Runtime"] == "python3.13"
    assert fn["FunctionName"] == {"Fn::Sub": "${AWS::StackName}-fallback-breaker"}
    module, _, attribute = fn["Handler"].rpartition(".")
    assert module == breaker.__name__
    assert callable(getattr(breaker, attribute))
    code = ROOT / fn["CodeUri"]
    assert (code / Path(*module.split("."))).with_suffix(".py").is_file()
    assert fn["Architectures"] == [{"Ref": "Architecture"}]
    # Built from its own lock (release/lambda.mk), which holds only what it imports.
    assert RESOURCES["BreakerFunction"]["Metadata"]["BuildMethod"] == "makefile"
    for arch in PARAMETERS["Architecture"]["AllowedValues"]:
        lock = (ROOT / "locks" / f"breaker-{arch}.txt").read_text()
        assert "\naws-lambda-powertools==" in lock
        assert "\nboto3==" in lock
        assert "starlette" not in lock
        assert "pydantic" not in lock
    assert breaker.ENV_FLAG_PARAMETER == settings.ENV_FLAG_PARAMETER
    assert breaker.DEFAULT_FLAG_PARAMETER == settings.DEFAULT_FLAG_PARAMETER
    # The breaker and the gateway name the same flag, under any naming of it.
    for given in ({}, {"FlagParameterName": "/ops/gw-fallback"}):
        stack = Stack(TEMPLATE_JSON, "gw", parameters=given)
        resolved = stack.resources()
        env = resolved["BreakerFunction"]["Properties"]["Environment"]["Variables"]
        gateway_env = resolved["GatewayFunction"]["Properties"]["Environment"]["Variables"]
        flag = gateway_env[settings.ENV_FLAG_PARAMETER]
        assert env[breaker.ENV_FLAG_PARAMETER] == flag
        assert env[breaker.ENV_ALERT_TOPIC_ARN] == "gw/AlarmTopic"
        assert env[settings.ENV_SERVICE_NAME] == "gw"
        flag_arn = f"arn:aws:ssm:us-east-1:123456789012:parameter{flag}"
        assert _statements(resolved["BreakerFunction"]["Properties"]) == {
            "ssm:GetParameter": [flag_arn],
            "ssm:PutParameter": [flag_arn],
            "sns:Publish": ["gw/AlarmTopic"],
            # The encrypted topic's key (test_the_kms_key_encrypts_...).
            "kms:Decrypt": ["gw/AlarmTopicKey.Arn"],
            "kms:GenerateDataKey": ["gw/AlarmTopicKey.Arn"],
        }


def test_insight_rule_counts_callers_in_the_gateways_log_group() -> None:
    body = insight_rule_body()
    assert body["Schema"] == {"Name": "CloudWatchLogRule", "Version": 1}
    assert body["LogGroupNames"] == ["${GatewayLogGroup}"]
    assert _function()["LoggingConfig"]["LogGroup"] == {"Ref": "GatewayLogGroup"}
    assert body["LogFormat"] == "JSON"
    assert body["Contribution"]["Keys"] == ["$.caller"]
    assert body["AggregateOn"] == "Count"
    # Which lines it counts is checked against real log lines in
    # tests/test_budget.py::test_the_insight_rule_counts_fallback_and_denied_lines.


def test_dashboard_shows_the_top_callers_and_the_surge_alarm() -> None:
    body = _resource("Dashboard", "AWS::CloudWatch::Dashboard")["DashboardBody"]["Fn::Sub"]
    assert "${FallbackCallersInsightRule.RuleName}" in body
    assert "${FallbackSurgeAlarm.Arn}" in body
    stack = Stack(TEMPLATE_JSON, names.SERVICE_NAME)
    widgets = json.loads(stack.resources()["Dashboard"]["Properties"]["DashboardBody"])["widgets"]
    (insight,) = [
        w
        for w in widgets
        if w["properties"]
        .get("insightRule", {})
        .get("ruleName", "")
        .endswith("CallersInsightRule.RuleName")
    ]
    assert insight["properties"]["insightRule"]["orderBy"] == "Sum"
    assert insight["properties"]["insightRule"]["maxContributorCount"] >= 10


def test_outputs_name_the_budget_table_and_the_budget_command() -> None:
    assert _ref(OUTPUTS["FallbackBudgetTableName"]["Value"]) == "FallbackBudgetTable"
    command = OUTPUTS["BudgetReadCommand"]["Value"]["Fn::Sub"]
    assert "policy-gateway budget CALLER" in command
    for name in (
        settings.ENV_FALLBACK_BUDGET_TABLE,
        settings.ENV_FALLBACK_BUDGET,
        settings.ENV_FALLBACK_BUDGET_WINDOW,
    ):
        assert f"{name}=" in command
    assert "Condition" not in OUTPUTS["AlarmTopicArn"]


# -------------------------------------------- the scanner's baseline (issue 24)

KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# Checks that do not apply, each skipped in template.yaml with its reason:
# changing this set is a decision to review, not a side effect of an edit.
REVIEWED_SCANNER_SKIPS = {
    ("GatewayFunction", "CKV_AWS_116"),  # dead-letter queue: invoked synchronously
    ("GatewayFunction", "CKV_AWS_117"),  # VPC: calls only public endpoints
    ("BreakerFunction", "CKV_AWS_116"),  # it has an on-failure destination instead
    ("BreakerFunction", "CKV_AWS_117"),
    ("BreakerFunction", "CKV_AWS_115"),  # concurrency: one alarm invokes it
    # The records bucket (issue 43): no access log bucket, no versions (deletes must delete).
    ("RecordsBucket", "CKV_AWS_18"),
    ("RecordsBucket", "CKV_AWS_21"),
}


def test_every_scanner_skip_is_a_reviewed_one_with_its_reason() -> None:
    skips = {
        (logical_id, skip["id"]): skip["comment"]
        for logical_id, resource in RESOURCES.items()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    }
    assert set(skips) == REVIEWED_SCANNER_SKIPS
    assert all(len(comment.split()) >= 8 for comment in skips.values()), skips


def test_make_test_runs_the_scanner_offline_on_the_template() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test:.*\bscan\b", makefile, re.M)
    (recipe,) = re.findall(r"^scan:.*\n((?:\t.*\n)+)", makefile, re.M)
    command = recipe.replace("\\\n", " ")
    assert "checkov" in command
    assert "-f template.yaml" in command
    # No platform download, no update check: the scan needs no network.
    assert "--skip-download" in command
    assert "CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE" in command
    assert "env -u BC_API_KEY " in command


def test_reserved_concurrency_caps_the_gateway_only_when_given() -> None:
    pattern = PARAMETERS["ReservedConcurrency"]["AllowedPattern"]
    assert _parameter_default("ReservedConcurrency") == ""
    assert re.fullmatch(pattern, "")
    assert re.fullmatch(pattern, "50")
    # Reserved concurrency 0 throttles every call: a cap, never an off switch.
    assert not re.fullmatch(pattern, "0")
    default = Stack(TEMPLATE_JSON, "gw").resources()["GatewayFunction"]["Properties"]
    assert "ReservedConcurrentExecutions" not in default
    capped = Stack(TEMPLATE_JSON, "gw", parameters={"ReservedConcurrency": "50"}).resources()
    assert capped["GatewayFunction"]["Properties"]["ReservedConcurrentExecutions"] == "50"


@pytest.mark.parametrize("key", ["", KMS_KEY], ids=["aws-managed", "customer-key"])
def test_the_kms_key_encrypts_secrets_logs_table_environments_topic_and_queue(key: str) -> None:
    assert re.fullmatch(PARAMETERS["KmsKeyArn"]["AllowedPattern"], key)
    resources = Stack(TEMPLATE_JSON, "gw", parameters={"KmsKeyArn": key}).resources()
    encrypted_by = {
        ("GatewayKeysSecret", "KmsKeyId"),
        ("UpstreamApiKeySecret", "KmsKeyId"),
        ("GatewayLogGroup", "KmsKeyId"),
        ("BreakerLogGroup", "KmsKeyId"),
        ("GatewayFunction", "KmsKeyArn"),
        ("BreakerFunction", "KmsKeyArn"),
    }
    for logical_id, name in encrypted_by:
        assert resources[logical_id]["Properties"].get(name) == (key or None), logical_id
    table = resources["FallbackBudgetTable"]["Properties"]
    assert table["SSESpecification"] == (
        {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": key}
        if key
        else {"SSEEnabled": False}
    )
    gateway = _statements(resources["GatewayFunction"]["Properties"])
    breaker_ = _statements(resources["BreakerFunction"]["Properties"])
    topic_key = resources["AlarmTopic"]["Properties"]["KmsMasterKeyId"]
    queue_key = resources["BreakerFailureQueue"]["Properties"]["KmsMasterKeyId"]
    if key:
        assert (topic_key, queue_key) == (key, key)
        assert "AlarmTopicKey" not in resources
        for action in ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"):
            assert gateway[action] == [key]
        assert breaker_["kms:Decrypt"] == breaker_["kms:GenerateDataKey"] == [key]
        return
    # Without a key of the operator's, the topic gets one of the stack's own:
    # CloudWatch alarms cannot publish with the AWS managed SNS key.
    assert topic_key == "gw/AlarmTopicKey"
    assert queue_key == "alias/aws/sqs"
    # The one key use left is encrypting records with their own key (test_template_records.py).
    assert {a: r for a, r in gateway.items() if a.startswith("kms:")} == {
        "kms:GenerateDataKey": ["gw/RecordsKey.Arn"]
    }
    assert breaker_["kms:Decrypt"] == breaker_["kms:GenerateDataKey"] == ["gw/AlarmTopicKey.Arn"]
    topic_key_props = resources["AlarmTopicKey"]["Properties"]
    assert topic_key_props["EnableKeyRotation"] is True
    (cloudwatch,) = [
        statement
        for statement in topic_key_props["KeyPolicy"]["Statement"]
        if statement["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(cloudwatch["Action"])


def test_the_budget_table_has_point_in_time_recovery() -> None:
    table = _resource("FallbackBudgetTable", "AWS::DynamoDB::Table")
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_a_failed_breaker_run_is_kept_and_raises_an_alarm() -> None:
    breaker_fn = _resource("BreakerFunction", "AWS::Serverless::Function")
    assert breaker_fn["EventInvokeConfig"]["DestinationConfig"]["OnFailure"] == {
        "Type": "SQS",
        "Destination": {"Fn::GetAtt": ["BreakerFailureQueue", "Arn"]},
    }
    queue = _resource("BreakerFailureQueue", "AWS::SQS::Queue")
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600  # the longest SQS keeps
    alarm = _resource("BreakerFailureAlarm", "AWS::CloudWatch::Alarm")
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["BreakerFailureQueue", "QueueName"]}}
    ]
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
