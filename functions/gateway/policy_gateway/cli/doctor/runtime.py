"""`policy-gateway doctor`: the deployed function's wiring, the runtime side of a stack.

Is the stack deployed, does the function run as the template says behind the
Lambda Web Adapter, does its URL stream, do its layers exist, does it answer.
"""

from __future__ import annotations

from ..deployment import FUNCTION_LOGICAL_ID
from .checkup import Checkup, Problem, aws_error

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
OK_STACK_STATES = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"}


def _layer_name(arn: str) -> str:
    # arn:<partition>:lambda:<region>:<account>:layer:<name>:<version>
    parts = arn.split(":")
    return parts[6] if len(parts) >= 8 else arn


def stack(checkup: Checkup) -> str:
    status = str(checkup.deployment.stack["StackStatus"])
    if status not in OK_STACK_STATES:
        raise Problem(
            f"stack status is {status}",
            "see the stack's events (aws cloudformation describe-stack-events) and "
            "deploy again with `sam deploy`",
        )
    return status


def function(checkup: Checkup) -> str:
    deployment = checkup.deployment
    function = deployment.function
    template = deployment.template["Resources"].get(FUNCTION_LOGICAL_ID, {})
    expected = template.get("Properties", {})
    wrong: list[str] = []
    for key in ("Runtime", "Handler", "Architectures"):
        want = checkup.template_value(expected.get(key))
        if want is not None and function.get(key) != want:
            wrong.append(f"{key} is {function.get(key)!r}, the template says {want!r}")
    env = deployment.environment
    declared = expected.get("Environment", {}).get("Variables", {})
    for name, value in {**declared, **ADAPTER_ENV}.items():
        if name not in env:
            wrong.append(f"environment variable {name} is missing")
            continue
        want = ADAPTER_ENV.get(name) or checkup.template_value(value)
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


def function_url(checkup: Checkup) -> str:
    lambda_ = checkup.deployment.client("lambda")
    try:
        config = lambda_.get_function_url_config(FunctionName=checkup.deployment.function_name)
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
    auth = checkup.deployment.parameter("FunctionUrlAuthType")
    if auth and config.get("AuthType") != auth:
        raise Problem(
            f"AuthType is {config.get('AuthType')}, the stack's parameter says {auth}",
            "`sam deploy` to restore it",
        )
    return f"{config['FunctionUrl']} ({config.get('AuthType')}, {URL_INVOKE_MODE})"


def layers(checkup: Checkup) -> str:
    function = checkup.deployment.function
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
    lambda_ = checkup.deployment.client("lambda")
    for arn in arns:
        layer, _, version = arn.rpartition(":")
        try:
            # GetLayerVersion with the layer's ARN is GetLayerVersionByArn's
            # twin (same permission, same answer) that local stand-ins model.
            lambda_.get_layer_version(LayerName=layer, VersionNumber=int(version))
        except Exception as exc:
            raise Problem(
                f"layer version {arn} cannot be read in this region ({aws_error(exc)})",
                "pin a layer version that exists in this region (docs/deploy.md lists the "
                "command and the accounts of the China regions) and `sam deploy`",
            ) from None
    return f"{len(arns)} layer versions exist, adapter {adapters[0]}"


def health(checkup: Checkup) -> str:
    import httpx2

    base = checkup.url or checkup.deployment.output("FunctionUrl")
    if not base:
        raise Problem("the stack has no FunctionUrl output", "`sam deploy`")
    url = base.rstrip("/") + HEALTH_PATH
    headers = _signed_headers(checkup, url)
    try:
        response = httpx2.get(url, headers=headers, timeout=HEALTH_TIMEOUT_SECONDS)
    except httpx2.HTTPError as exc:
        raise Problem(
            f"GET {url} failed: {type(exc).__name__}: {exc}",
            "check the function's logs (`sam logs --stack-name "
            f"{checkup.deployment.stack_name}`) and its network reachability",
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


def _signed_headers(checkup: Checkup, url: str) -> dict[str, str]:
    """A SigV4 signature for AuthType AWS_IAM; an open URL needs none."""
    if checkup.url or checkup.deployment.parameter("FunctionUrlAuthType") != "AWS_IAM":
        return {}
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session = boto3.Session(region_name=checkup.deployment.region)
    credentials = session.get_credentials()
    if credentials is None:
        raise Problem("the URL needs a SigV4 signature and no credentials were found", "")
    request = AWSRequest(method="GET", url=url)
    SigV4Auth(credentials, "lambda", session.region_name).add_auth(request)
    return dict(request.headers.items())
