"""`policy-gateway doctor`: check a deployed stack, read-only.

Each check answers one question an operator has before trusting a gateway
with traffic, and prints OK or what is wrong and how to fix it. Nothing is
written anywhere; the operator's own credentials are used.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from . import settings
from .deployment import FUNCTION_LOGICAL_ID, Deployment

# What the gateway needs from its function regardless of the template's
# other choices: the Web Adapter wraps the runtime and streams responses.
ADAPTER_ENV = {
    "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
    "AWS_LWA_INVOKE_MODE": "response_stream",
}
URL_INVOKE_MODE = "RESPONSE_STREAM"
HEALTH_PATH = "/healthz"
ADAPTER_LAYER_PREFIX = "LambdaAdapterLayer"
# The adapter publishes one layer per architecture.
ADAPTER_LAYER_ARCHITECTURE = {"LambdaAdapterLayerX86": "x86_64", "LambdaAdapterLayerArm64": "arm64"}
HEALTH_TIMEOUT_SECONDS = 15.0
_OK_STACK_STATES = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"}


class Problem(Exception):
    """A failed check: what is wrong, and how to fix it."""

    def __init__(self, wrong: str, fix: str) -> None:
        super().__init__(wrong)
        self.wrong = wrong
        self.fix = fix


@dataclass
class Result:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def lines(self) -> list[str]:
        lines = [f"{'OK  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}"]
        if self.fix:
            lines.append(f"      fix: {self.fix}")
        return lines


Check = Callable[["Doctor"], str]


def _aws_error(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', type(exc).__name__)}: {error.get('Message', exc)}"
    return f"{type(exc).__name__}: {exc}"


def _layer_name(arn: str) -> str:
    # arn:<partition>:lambda:<region>:<account>:layer:<name>:<version>
    parts = arn.split(":")
    return parts[6] if len(parts) >= 8 else arn


def _dimensions(metric: dict[str, Any]) -> dict[str, str]:
    return {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}


def mismatched_alarms(alarms: Iterable[dict[str, Any]], namespace: str, service: str) -> list[str]:
    """Each alarm on the gateway's namespace that does not watch exactly [service]."""
    emitted = {settings.METRICS_SERVICE_DIMENSION: service}
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


class Doctor:
    def __init__(self, deployment: Deployment, url: str | None = None) -> None:
        self.deployment = deployment
        self.url = url
        self.init_command = f"policy-gateway init --stack {deployment.stack_name}" + (
            f" --region {deployment.region}" if deployment.region else ""
        )

    def _template_value(self, value: Any) -> Any:
        """A template value as deployed, or None where it needs more than a Ref to know."""
        if isinstance(value, str | int | float):
            return str(value)
        if isinstance(value, list):
            items = [self._template_value(item) for item in value]
            return None if None in items else items
        if isinstance(value, dict) and list(value) == ["Ref"]:
            if value["Ref"] == "AWS::StackName":
                return self.deployment.stack_name
            return self.deployment.parameter(value["Ref"])
        return None

    # ------------------------------------------------------------ the checks

    def stack(self) -> str:
        status = str(self.deployment.stack["StackStatus"])
        if status not in _OK_STACK_STATES:
            raise Problem(
                f"stack status is {status}",
                "see the stack's events (aws cloudformation describe-stack-events) and "
                "deploy again with `sam deploy`",
            )
        return status

    def function(self) -> str:
        deployment = self.deployment
        function = deployment.function
        template = deployment.template["Resources"].get(FUNCTION_LOGICAL_ID, {})
        expected = template.get("Properties", {})
        wrong: list[str] = []
        for key in ("Runtime", "Handler", "Architectures"):
            want = self._template_value(expected.get(key))
            if want is not None and function.get(key) != want:
                wrong.append(f"{key} is {function.get(key)!r}, the template says {want!r}")
        env = deployment.environment
        declared = expected.get("Environment", {}).get("Variables", {})
        for name, value in {**declared, **ADAPTER_ENV}.items():
            if name not in env:
                wrong.append(f"environment variable {name} is missing")
                continue
            want = ADAPTER_ENV.get(name) or self._template_value(value)
            if want is not None and env[name] != want:
                wrong.append(f"{name}={env[name]!r}, expected {want!r}")
        if function.get("State", "Active") != "Active":
            wrong.append(f"function state is {function.get('State')}")
        if wrong:
            raise Problem(
                "; ".join(wrong),
                "the function was changed outside CloudFormation, or the stack is older than "
                "this template: `sam build && sam deploy`",
            )
        return (
            f"{deployment.function_name}: {function.get('Runtime')}, "
            f"{len(env)} environment variables as the template sets them, behind the Web Adapter"
        )

    def function_url(self) -> str:
        lambda_ = self.deployment.client("lambda")
        try:
            config = lambda_.get_function_url_config(FunctionName=self.deployment.function_name)
        except lambda_.exceptions.ResourceNotFoundException:
            raise Problem(
                "the function has no Function URL", "`sam deploy` (the template declares it)"
            ) from None
        if config.get("InvokeMode") != URL_INVOKE_MODE:
            raise Problem(
                f"InvokeMode is {config.get('InvokeMode')}: responses are buffered, streams "
                "arrive all at once and stop at 6 MB",
                "`sam deploy` (the template sets InvokeMode: RESPONSE_STREAM)",
            )
        auth = self.deployment.parameter("FunctionUrlAuthType")
        if auth and config.get("AuthType") != auth:
            raise Problem(
                f"AuthType is {config.get('AuthType')}, the stack's parameter says {auth}",
                "`sam deploy` to restore it",
            )
        return f"{config['FunctionUrl']} ({config.get('AuthType')}, {URL_INVOKE_MODE})"

    def layers(self) -> str:
        function = self.deployment.function
        arns = [str(layer["Arn"]) for layer in function.get("Layers", [])]
        adapters = [arn for arn in arns if _layer_name(arn).startswith(ADAPTER_LAYER_PREFIX)]
        if len(adapters) != 1:
            raise Problem(
                f"expected one Lambda Web Adapter layer, found {adapters or 'none'}",
                "`sam deploy` (the template attaches the pinned adapter layer)",
            )
        architecture = ADAPTER_LAYER_ARCHITECTURE.get(_layer_name(adapters[0]))
        if architecture and [architecture] != function.get("Architectures", ["x86_64"]):
            raise Problem(
                f"{adapters[0]} is built for {architecture}, the function runs on "
                f"{function.get('Architectures')}",
                "use the adapter layer of the function's architecture and `sam deploy`",
            )
        lambda_ = self.deployment.client("lambda")
        for arn in arns:
            layer, _, version = arn.rpartition(":")
            try:
                # GetLayerVersion with the layer's ARN is GetLayerVersionByArn's
                # twin (same permission, same answer) that local stand-ins model.
                lambda_.get_layer_version(LayerName=layer, VersionNumber=int(version))
            except Exception as exc:
                raise Problem(
                    f"layer version {arn} cannot be read in this region ({_aws_error(exc)})",
                    "pin a layer version that exists in this region (docs/deploy.md lists the "
                    "command and the accounts of the China regions) and `sam deploy`",
                ) from None
        return f"{len(arns)} layer versions exist, adapter {adapters[0]}"

    def _read_parameter(self, name: str) -> str:
        ssm = self.deployment.client("ssm")
        try:
            return str(ssm.get_parameter(Name=name)["Parameter"]["Value"])
        except ssm.exceptions.ParameterNotFound:
            raise Problem(
                f"parameter {name} does not exist (the gateway reads the fallback as off and "
                "refuses calls while it has no policy chain)",
                f"`{self.init_command}` creates what is missing and never overwrites",
            ) from None

    def flag(self) -> str:
        from .flag import parse_flag

        name = self.deployment.flag_parameter
        value = self._read_parameter(name)
        parsed = parse_flag(value)
        if parsed is None:
            raise Problem(
                f"{name} holds {value[:40]!r}, which the gateway reads as off",
                "`policy-gateway flag on` or `policy-gateway flag off` "
                f"(with {settings.ENV_FLAG_PARAMETER}={name})",
            )
        return f"{name} = {value} (fallback {'on' if parsed else 'off'})"

    def policy_chain(self) -> str:
        from gateway_policies import PolicyConfigError, load_chain

        name = self.deployment.policy_config_parameter
        try:
            chain = load_chain(self._read_parameter(name))
        except PolicyConfigError as exc:
            raise Problem(
                f"{name} does not load: {exc} (running gateways keep their last good chain; "
                "new instances refuse calls)",
                "`policy-gateway policy set FILE` with a valid chain "
                f"(with {settings.ENV_POLICY_CONFIG_PARAMETER}={name})",
            ) from None
        return f"{name}: {len(chain.policies)} policies ({', '.join(chain.names) or 'none'})"

    def alarms(self) -> str:
        deployment = self.deployment
        cloudwatch = deployment.client("cloudwatch")
        namespace, service = deployment.metrics_namespace, deployment.service_name
        names = deployment.alarm_names
        # Never an empty AlarmNames: DescribeAlarms would return every alarm.
        found = {
            alarm["AlarmName"]: alarm
            for start in range(0, len(names), 100)
            for alarm in cloudwatch.describe_alarms(AlarmNames=names[start : start + 100])[
                "MetricAlarms"
            ]
        }
        wrong = [
            f"alarm {name} is in the stack but not in CloudWatch"
            for name in names
            if name not in found
        ]
        wrong += mismatched_alarms(found.values(), namespace, service)
        emitted = {settings.METRICS_SERVICE_DIMENSION: service}
        watching = [
            alarm
            for alarm in cloudwatch.describe_alarms_for_metric(
                Namespace=namespace,
                MetricName=settings.METRIC_FALLBACK,
                Dimensions=[{"Name": key, "Value": value} for key, value in emitted.items()],
            )["MetricAlarms"]
            # CloudWatch matches the dimension set exactly; checked here too so
            # the answer does not depend on that.
            if _dimensions(alarm) == emitted
        ]
        if not watching:
            wrong.append(
                f"no alarm watches {namespace}/{settings.METRIC_FALLBACK} with "
                f"{settings.METRICS_SERVICE_DIMENSION}={service}: a fallback would go unnoticed"
            )
        if wrong:
            raise Problem(
                "; ".join(wrong),
                "`sam deploy` (the template sets the function's service name and every alarm's "
                "dimension from the stack name)",
            )
        return (
            f"{', '.join(sorted(a['AlarmName'] for a in watching))} watch "
            f"{namespace}/{settings.METRIC_FALLBACK} {settings.METRICS_SERVICE_DIMENSION}={service}"
        )

    def health(self) -> str:
        import httpx2

        base = self.url or self.deployment.output("FunctionUrl")
        if not base:
            raise Problem("the stack has no FunctionUrl output", "`sam deploy`")
        url = base.rstrip("/") + HEALTH_PATH
        headers = self._signed_headers(url)
        try:
            response = httpx2.get(url, headers=headers, timeout=HEALTH_TIMEOUT_SECONDS)
        except httpx2.HTTPError as exc:
            raise Problem(
                f"GET {url} failed: {type(exc).__name__}: {exc}",
                "check the function's logs (`sam logs --stack-name "
                f"{self.deployment.stack_name}`) and its network reachability",
            ) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != 200 or body != {"status": "ok"}:
            raise Problem(
                f"GET {url} answered {response.status_code} {response.text[:200]!r}",
                "503: the gateway failed to start, see its logs; 403: the URL's AuthType or "
                "resource policy refuses callers",
            )
        return f"GET {url} answered 200 in {response.elapsed.total_seconds() * 1000:.0f} ms"

    def _signed_headers(self, url: str) -> dict[str, str]:
        """A SigV4 signature for AuthType AWS_IAM; an open URL needs none."""
        if self.url or self.deployment.parameter("FunctionUrlAuthType") != "AWS_IAM":
            return {}
        import boto3
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        session = boto3.Session(region_name=self.deployment.region)
        credentials = session.get_credentials()
        if credentials is None:
            raise Problem("the URL needs a SigV4 signature and no credentials were found", "")
        request = AWSRequest(method="GET", url=url)
        SigV4Auth(credentials, "lambda", session.region_name).add_auth(request)
        return dict(request.headers.items())

    # --------------------------------------------------------------- running

    CHECKS: tuple[tuple[str, Check], ...] = (
        ("stack", stack),
        ("function", function),
        ("function URL", function_url),
        ("layers", layers),
        ("fallback flag", flag),
        ("policy chain", policy_chain),
        ("alarms", alarms),
        ("health", health),
    )

    def run(self) -> Iterator[Result]:
        for name, check in self.CHECKS:
            try:
                yield Result(name, True, check(self))
            except Problem as problem:
                yield Result(name, False, problem.wrong, problem.fix)
            except Exception as exc:
                yield Result(
                    name,
                    False,
                    f"could not check: {_aws_error(exc)}",
                    "check the credentials, the region and that they may read the stack",
                )


def main(stack_name: str, region: str | None, url: str | None) -> int:
    from .deployment import StackNotFound

    doctor = Doctor(Deployment(stack_name, region), url)
    results: list[Result] = []
    try:
        doctor.deployment.stack  # noqa: B018 - a missing stack makes every check moot
    except StackNotFound:
        results.append(
            Result(
                "stack",
                False,
                f"no stack named {stack_name} in {region or 'the default region'}",
                "check --stack and --region (`aws cloudformation list-stacks`)",
            )
        )
    else:
        results.extend(doctor.run())
    for result in results:
        print("\n".join(result.lines()), flush=True)
    failed = [result.name for result in results if not result.ok]
    print(
        f"{len(results) - len(failed)} of {len(results)} checks passed"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
        file=sys.stderr,
    )
    return 1 if failed else 0
