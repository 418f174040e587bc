"""The SAM template, samconfig.toml and events/ agree with the code's names.

The alarm only fires if it names exactly the namespace, metric and dimension set
that the code emits, and the function only finds its flag if the template's
environment uses the names settings.py reads: these tests pin both to the
constants in policy_gateway.settings. cfn-lint and `sam validate --lint` run
offline, so they are part of the suite too.
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
from cfnlint.decode.cfn_yaml import load as load_cfn_yaml  # type: ignore[import-untyped]
from gateway_policies.loader import load_chain
from policy_gateway import settings

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
EVENTS = ROOT / "events"
BIN = Path(sys.executable).parent

ADAPTER_LAYER = re.compile(
    r"^arn:\$\{AWS::Partition\}:lambda:\$\{AWS::Region\}:753240598075:"
    r"layer:LambdaAdapterLayerX86:(\d+)$"
)

# Issue 5 adds these to settings.py; until then the template's names are the spec.
ENV_AUTH_MODE: str = getattr(settings, "ENV_AUTH_MODE", "AUTH_MODE")
ENV_GATEWAY_KEYS_SECRET: str = getattr(settings, "ENV_GATEWAY_KEYS_SECRET", "GATEWAY_KEYS_SECRET")
ENV_UPSTREAM_API_KEY_SECRET: str = getattr(
    settings, "ENV_UPSTREAM_API_KEY_SECRET", "UPSTREAM_API_KEY_SECRET"
)
# Powertools Metrics names the service dimension "service".
SERVICE_DIMENSION: str = getattr(settings, "METRICS_SERVICE_DIMENSION", "service")

# Environment variables that belong to Lambda, the Web Adapter or Python.
PLATFORM_ENV = {
    "AWS_LAMBDA_EXEC_WRAPPER",
    "AWS_LWA_INVOKE_MODE",
    "AWS_LWA_PORT",
    "AWS_LWA_READINESS_CHECK_PATH",
    "PYTHONUNBUFFERED",
}

Json = dict[str, Any]


def _load_template() -> Json:
    # cfn-lint's loader understands the short intrinsic tags (!Ref, !Sub, ...) and
    # returns them in their long form ({"Ref": ...}, {"Fn::Sub": ...}).
    loaded = json.loads(json.dumps(load_cfn_yaml(str(TEMPLATE))))
    assert isinstance(loaded, dict)
    return loaded


TEMPLATE_JSON = _load_template()
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
    return {
        value
        for name, value in vars(settings).items()
        if name.startswith("METRIC_") and isinstance(value, str)
    }


def _substitute(body: str) -> str:
    """Replace ${...} placeholders of an Fn::Sub string with dummy values."""
    return re.sub(r"\$\{[^}]+\}", "x", body)


# ----------------------------------------------------------------- the function


def test_function_runtime_handler_tracing() -> None:
    fn = _function()
    assert fn["Runtime"] == "python3.13"
    assert fn["Handler"] == "run.sh"
    assert fn["Tracing"] == "Active"
    assert fn["Architectures"] == ["x86_64"]
    # Long generations stream for minutes; 900 s is the Lambda/Function URL limit.
    assert fn["Timeout"] == 900
    assert fn["MemorySize"] >= 512
    code = ROOT / fn["CodeUri"]
    run_sh = code / "run.sh"
    assert run_sh.is_file()
    assert os.access(run_sh, os.X_OK), "run.sh must be executable: the adapter execs it"
    assert (code / "policy_gateway" / "__init__.py").is_file()
    assert (code / "requirements.txt").is_file()


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
    # since October 2025, InvokeFunction restricted to Function URL calls).
    assert TEMPLATE_JSON["Conditions"]["IsPublicUrl"] == {
        "Fn::Equals": [{"Ref": "FunctionUrlAuthType"}, "NONE"]
    }
    permissions = {
        logical_id: resource
        for logical_id, resource in RESOURCES.items()
        if resource["Type"] == "AWS::Lambda::Permission"
    }
    actions: dict[str, Json] = {}
    for resource in permissions.values():
        assert resource["Condition"] == "IsPublicUrl"
        props = resource["Properties"]
        assert _ref(props["FunctionName"]) == "GatewayFunction"
        assert props["Principal"] == "*"
        actions[props["Action"]] = props
    assert set(actions) == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    assert actions["lambda:InvokeFunctionUrl"]["FunctionUrlAuthType"] == "NONE"
    assert actions["lambda:InvokeFunction"]["InvokedViaFunctionUrl"] is True


def test_web_adapter_layer_is_pinned_and_configured() -> None:
    fn = _function()
    subs = [layer["Fn::Sub"] for layer in fn["Layers"] if "Fn::Sub" in layer]
    adapter = [sub for sub in subs if "LambdaAdapterLayer" in sub]
    assert len(adapter) == 1
    match = ADAPTER_LAYER.match(adapter[0])
    assert match, adapter[0]
    assert int(match.group(1)) >= 26
    env = _env()
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/healthz"
    assert env["PYTHONUNBUFFERED"] == "1"
    # run.sh listens on AWS_LWA_PORT; the adapter forwards to the same variable.
    assert env["AWS_LWA_PORT"].isdigit()
    run_sh = (ROOT / fn["CodeUri"] / "run.sh").read_text()
    assert "AWS_LWA_PORT" in run_sh


def test_policies_layer_is_built_with_python_and_attached() -> None:
    layer = _resource("PoliciesLayer", "AWS::Serverless::LayerVersion")
    assert RESOURCES["PoliciesLayer"]["Metadata"]["BuildMethod"] == "python3.13"
    assert layer["CompatibleRuntimes"] == ["python3.13"]
    assert layer["CompatibleArchitectures"] == _function()["Architectures"]
    content = ROOT / layer["ContentUri"]
    assert (content / "requirements.txt").is_file()
    assert (content / "gateway_policies" / "__init__.py").is_file()
    assert {"Ref": "PoliciesLayer"} in _function()["Layers"]


# ------------------------------------------------------ names shared with code


def test_environment_uses_the_names_settings_reads() -> None:
    env = _env()
    assert env[settings.ENV_SERVICE_NAME] == settings.SERVICE_NAME
    assert env[settings.ENV_METRICS_NAMESPACE] == settings.METRICS_NAMESPACE
    assert float(env[settings.ENV_FLAG_TTL]) == settings.DEFAULT_FLAG_TTL
    assert float(env[settings.ENV_POLICY_CONFIG_TTL]) == settings.DEFAULT_POLICY_CONFIG_TTL
    assert _ref(env[settings.ENV_UPSTREAM_BASE_URL]) == "UpstreamBaseUrl"
    assert _parameter_default("UpstreamBaseUrl") == settings.DEFAULT_UPSTREAM_BASE_URL
    assert _ref(env[settings.ENV_FLAG_PARAMETER]) == "FallbackFlagParameter"
    assert _ref(env[settings.ENV_POLICY_CONFIG_PARAMETER]) == "PolicyConfigParameter"
    assert _ref(env[ENV_AUTH_MODE]) == "AuthMode"
    assert _ref(env[ENV_GATEWAY_KEYS_SECRET]) == "GatewayKeysSecret"
    assert _ref(env[ENV_UPSTREAM_API_KEY_SECRET]) == "UpstreamApiKeySecret"
    # Every other variable must be a name the code knows: a typo here would be
    # silently ignored at run time.
    known = {
        value
        for name, value in vars(settings).items()
        if name.startswith("ENV_") and isinstance(value, str)
    } | {ENV_AUTH_MODE, ENV_GATEWAY_KEYS_SECRET, ENV_UPSTREAM_API_KEY_SECRET}
    assert set(env) - PLATFORM_ENV <= known


def test_ssm_parameters_default_to_the_code_defaults() -> None:
    flag = _resource("FallbackFlagParameter", "AWS::SSM::Parameter")
    assert _ref(flag["Name"]) == "FlagParameterName"
    assert _parameter_default("FlagParameterName") == settings.DEFAULT_FLAG_PARAMETER
    assert flag["Type"] == "String"
    assert flag["Value"] == "false"

    config = _resource("PolicyConfigParameter", "AWS::SSM::Parameter")
    assert _ref(config["Name"]) == "PolicyConfigParameterName"
    assert (
        _parameter_default("PolicyConfigParameterName") == settings.DEFAULT_POLICY_CONFIG_PARAMETER
    )
    assert config["Type"] == "String"
    assert json.loads(config["Value"]) == {"policies": []}
    assert len(load_chain(config["Value"]).policies) == 0

    # The IAM ARNs are built as "parameter${Name}", which is right only for names
    # that start with a slash.
    for name in ("FlagParameterName", "PolicyConfigParameterName"):
        pattern = PARAMETERS[name]["AllowedPattern"]
        assert re.fullmatch(pattern, _parameter_default(name))
        assert not re.fullmatch(pattern, "no-leading-slash")


def test_alarm_watches_exactly_the_emitted_fallback_metric() -> None:
    alarm = _resource("PassthroughFallbackAlarm", "AWS::CloudWatch::Alarm")
    assert alarm["Namespace"] == settings.METRICS_NAMESPACE
    assert alarm["MetricName"] == settings.METRIC_FALLBACK
    assert alarm["Dimensions"] == [{"Name": SERVICE_DIMENSION, "Value": settings.SERVICE_NAME}]
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
    assert RESOURCES["AlarmTopic"]["Condition"] == "HasAlarmEmail"
    subscription = RESOURCES["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Protocol"] == "email"
    assert _ref(subscription["Properties"]["Endpoint"]) == "AlarmEmail"


def test_dashboard_charts_every_metric_with_the_emitted_dimension() -> None:
    body = _resource("Dashboard", "AWS::CloudWatch::Dashboard")["DashboardBody"]["Fn::Sub"]
    dashboard = json.loads(_substitute(body))
    charted: dict[str, set[str]] = {}
    for widget in dashboard["widgets"]:
        properties = widget["properties"]
        for metric in properties.get("metrics", []):
            if metric[0] != settings.METRICS_NAMESPACE:
                continue
            name = metric[1]
            dims = [part for part in metric[2:] if isinstance(part, str)]
            assert dims == [SERVICE_DIMENSION, settings.SERVICE_NAME], metric
            options = metric[-1] if isinstance(metric[-1], dict) else {}
            charted.setdefault(name, set()).add(options.get("stat") or properties.get("stat"))
    assert set(charted) == _metric_names()
    for name in (settings.METRIC_LATENCY, settings.METRIC_TIME_TO_FIRST_EVENT):
        assert {"p50", "p99"} <= charted[name]
    for name in (
        settings.METRIC_REQUESTS,
        settings.METRIC_UPSTREAM_4XX,
        settings.METRIC_UPSTREAM_5XX,
        settings.METRIC_FALLBACK,
        settings.METRIC_FALLBACK_SUCCEEDED,
        settings.METRIC_FALLBACK_FAILED,
    ):
        assert charted[name] == {"Sum"}


# ------------------------------------------------------------------------ IAM


def test_iam_is_scoped_to_the_two_parameters_and_the_two_secrets() -> None:
    policies = _function()["Policies"]
    # Only inline statements: SAM policy templates such as SSMParameterReadPolicy
    # add ssm:DescribeParameters on "*".
    assert all(isinstance(p, dict) and set(p) == {"Statement"} for p in policies)
    statements = [s for p in policies for s in p["Statement"]]
    by_service: dict[str, list[Any]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        assert "*" not in json.dumps(actions), statement
        assert "*" not in json.dumps(resources), statement
        for action in actions:
            by_service.setdefault(action, []).extend(resources)
    assert set(by_service) == {"ssm:GetParameter", "secretsmanager:GetSecretValue"}
    partition_region_account = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}"
    assert sorted(r["Fn::Sub"] for r in by_service["ssm:GetParameter"]) == sorted(
        [
            f"{partition_region_account}:parameter${{FallbackFlagParameter}}",
            f"{partition_region_account}:parameter${{PolicyConfigParameter}}",
        ]
    )
    assert sorted(_ref(r) for r in by_service["secretsmanager:GetSecretValue"]) == [
        "GatewayKeysSecret",
        "UpstreamApiKeySecret",
    ]


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
    assert _ref(OUTPUTS["FlagParameterName"]["Value"]) == "FallbackFlagParameter"
    assert _ref(OUTPUTS["PolicyConfigParameterName"]["Value"]) == "PolicyConfigParameter"
    toggle = OUTPUTS["FlagToggleCommand"]["Value"]["Fn::Sub"]
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


@pytest.mark.parametrize("name", ["empty.json", "fallback-demo.json"])
def test_sample_policy_chains_load(name: str) -> None:
    load_chain((EVENTS / "policies" / name).read_text())


def test_fallback_demo_chain_empties_a_block_of_the_fallback_body() -> None:
    # The demo chain replaces a token that fills a whole text block with "":
    # the modified request has an empty text block, which the Messages API
    # rejects with a 400, while the original request is valid. That is exactly
    # the case the passthrough fallback exists for.
    chain = _read_json(EVENTS / "policies" / "fallback-demo.json")
    (policy,) = chain["policies"]
    assert policy["policy"] == "string_replace"
    ((old, new),) = policy["options"]["replacements"]
    assert new == ""
    blocks = _read_json(EVENTS / "bodies" / "fallback.json")["messages"][0]["content"]
    assert any(block["type"] == "text" and block["text"] == old for block in blocks)


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
