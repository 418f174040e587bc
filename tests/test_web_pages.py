"""A web page the developer opens can neither read `make run`'s AWS stand-in nor spend through
the gateway (issue 31, item 6), while every real client keeps working.

Through real servers on loopback: `policy-gateway serve --simulate-upstream --embedded-ssm`
in `gateway_key` mode after `init --secrets` stored an Anthropic key, as the README's
walkthrough leaves it, and the requests a browser sends for a page (its `Origin`,
`Sec-Fetch-Site`, preflights, a DNS-rebound `Host`); then a gateway in front of the fake
upstream, which counts what reaches it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import boto3
import httpx2
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from policy_gateway import settings
from policy_gateway.observability import tracing_settings

from .support.cli import cli
from .support.clock import eventually
from .support.fake_upstream import FakeUpstream
from .support.gateway import GatewayFactory
from .support.sdk import client, sdk
from .support.servers import ROOT, free_port, gateway_process
from .support.traces import XRayEndpoint

STORED_KEY = "sk-ant-stored-by-init-secrets-0123456789"
MODEL = "claude-sonnet-4-6"
PAGE = "https://evil.example"
READ_THE_KEY = {"SecretId": settings.DEFAULT_UPSTREAM_API_KEY_SECRET}
# What a page's fetch() sends to read the key: AWS's JSON protocol, no signature.
PAGE_READ_HEADERS = {
    "content-type": "application/x-amz-json-1.1",
    "x-amz-target": "secretsmanager.GetSecretValue",
}
PAGE_READ_BODY = json.dumps(READ_THE_KEY)
ASK: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hello"}],
}


@dataclass(frozen=True)
class LocalRun:
    gateway: str
    aws: str
    aws_port: int
    gateway_key: str
    operator: dict[str, str]
    """The `export ...` the banner prints for another shell."""


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRun]:
    """`AUTH_MODE=gateway_key make run`, then `init --secrets` with ANTHROPIC_API_KEY set."""
    log: Path = tmp_path_factory.mktemp("local_run") / "serve.log"
    aws_port = free_port()
    serve_args = ["--simulate-upstream", "--embedded-ssm", "--embedded-ssm-port", str(aws_port)]
    env = {settings.ENV_AUTH_MODE: settings.AUTH_GATEWAY_KEY, "PYTHONPATH": str(ROOT)}
    with pytest.MonkeyPatch.context() as laptop:
        # Nothing configured, as on a laptop: the session's moto endpoints unset.
        for name in list(os.environ):
            if name.startswith("AWS_") or name == settings.ENV_UPSTREAM_BASE_URL:
                laptop.delenv(name)
        with gateway_process(env, stdout_path=log, serve_args=serve_args) as (url, _):
            line = re.search(r"in another shell: export (.+)", log.read_text())
            assert line is not None, log.read_text()
            operator = dict(pair.split("=", 1) for pair in line.group(1).split())
            created = cli(
                "init", "--secrets", env={**operator, settings.ENV_ANTHROPIC_API_KEY: STORED_KEY}
            )
            assert created.returncode == 0, created.stderr
            found = re.search(r"key 'local' = (\S+)", created.stdout)
            assert found is not None, created.stdout
            yield LocalRun(url, operator["AWS_ENDPOINT_URL"], aws_port, found.group(1), operator)


def _secrets(endpoint: str, **config: Any) -> Any:
    return boto3.client(
        "secretsmanager",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"total_max_attempts": 1}, **config),
    )


def _signed(endpoint: str, host: str) -> dict[str, str]:
    """GetSecretValue's headers, SigV4-signed by botocore for `host`: what a page's script
    sends once a DNS rebinding made `host` resolve to the stand-in (same-origin, so it may
    set any header; its Host is still the page's own name)."""
    request = AWSRequest(
        "POST", f"http://{host}/", data=PAGE_READ_BODY.encode(), headers=PAGE_READ_HEADERS
    )
    SigV4Auth(Credentials("local", "local"), "secretsmanager", "us-east-1").add_auth(request)
    return {**request.headers, "host": host}


def _no_cors_grant(response: httpx2.Response) -> None:
    granted = [name for name in response.headers if name.lower().startswith("access-control-")]
    assert granted == []


def _refused_aws_style(response: httpx2.Response) -> None:
    assert response.status_code == 403, response.text
    assert response.headers["x-amzn-errortype"] == "AccessDeniedException"
    assert response.json()["__type"] == "AccessDeniedException"
    assert STORED_KEY not in response.text
    _no_cors_grant(response)


def test_the_sdks_and_the_commands_still_read_and_write_the_stand_in(local_run: LocalRun) -> None:
    for endpoint in (local_run.aws, f"http://localhost:{local_run.aws_port}"):
        stored = _secrets(endpoint).get_secret_value(**READ_THE_KEY)
        assert stored["SecretString"] == STORED_KEY
    # This test's session moto endpoints are set per service: the stand-in's, for SSM.
    operator = {**local_run.operator, "AWS_ENDPOINT_URL_SSM": local_run.aws}
    assert cli("flag", "on", env=operator).returncode == 0
    assert json.loads(cli("flag", "status", env=operator).stdout)["fallback_enabled"] is True
    # The gateway itself reads its keys and the stored Anthropic key through the stand-in
    # (after the short back-off of its read before `init --secrets`).
    eventually(lambda: _answered(local_run), timeout=10)


def _answered(local_run: LocalRun) -> bool:
    try:
        client(local_run.gateway, api_key=local_run.gateway_key).messages.create(**ASK)
    except anthropic.InternalServerError:
        return False
    return True


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(PAGE_READ_HEADERS, id="none"),
        pytest.param({**PAGE_READ_HEADERS, "authorization": "Bearer x"}, id="other-scheme"),
        pytest.param(
            {**PAGE_READ_HEADERS, "authorization": "AWS4-HMAC-SHA256 Credential=a"},
            id="sigv4-in-name-only",
        ),
        pytest.param({"content-type": "text/plain"}, id="simple-request"),
    ],
)
def test_a_request_without_a_sigv4_authorization_is_refused(
    local_run: LocalRun, headers: dict[str, str]
) -> None:
    response = httpx2.post(local_run.aws, headers=headers, content=PAGE_READ_BODY)
    _refused_aws_style(response)
    assert "SigV4" in response.json()["message"]


def test_a_page_s_signed_request_is_refused(local_run: LocalRun) -> None:
    """Had a preflight granted it the header, any signature would do: moto checks none. A
    browser marks every request a page makes (`Origin` on a cross-origin one)."""
    headers = _signed(local_run.aws, f"127.0.0.1:{local_run.aws_port}")
    for marks in ({"origin": PAGE}, {"sec-fetch-site": "cross-site"}):
        response = httpx2.post(local_run.aws, headers={**headers, **marks}, content=PAGE_READ_BODY)
        _refused_aws_style(response)
        assert "web page" in response.json()["message"]


def test_a_cors_preflight_is_refused_and_grants_nothing(local_run: LocalRun) -> None:
    response = httpx2.request(
        "OPTIONS",
        local_run.aws,
        headers={
            "origin": PAGE,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,x-amz-target,content-type",
        },
    )
    _refused_aws_style(response)


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1.nip.io:{port}", "127.0.0.1"])
def test_a_signed_request_for_a_foreign_host_is_refused(local_run: LocalRun, host: str) -> None:
    """DNS rebinding: a page's own name, resolved to 127.0.0.1, with a signature its script
    computed (any credentials will do: the stand-in cannot check one)."""
    headers = _signed(local_run.aws, host.format(port=local_run.aws_port))
    response = httpx2.post(local_run.aws, headers=headers, content=PAGE_READ_BODY)
    _refused_aws_style(response)
    assert "Host" in response.json()["message"]


def test_boto3_reads_a_refusal_as_an_access_denied_error(local_run: LocalRun) -> None:
    unsigned = _secrets(local_run.aws, signature_version=UNSIGNED)
    with pytest.raises(ClientError) as refused:
        unsigned.get_secret_value(**READ_THE_KEY)
    error = refused.value.response
    assert error["Error"]["Code"] == "AccessDeniedException"
    assert "SigV4" in error["Error"]["Message"]
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403


PAGE_MARKS = [
    pytest.param({"origin": PAGE}, id="origin"),
    pytest.param({"origin": "null"}, id="origin-null"),
    pytest.param({"sec-fetch-site": "cross-site"}, id="cross-site"),
    pytest.param({"sec-fetch-site": "same-site"}, id="same-site"),
    pytest.param({"sec-fetch-site": "same-origin"}, id="same-origin"),
]


def _page_refusal(response: httpx2.Response) -> None:
    assert response.status_code == 403, response.text
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "permission_error"
    _no_cors_grant(response)


@pytest.mark.parametrize("marks", PAGE_MARKS)
def test_the_local_gateway_refuses_what_a_page_sends_before_spending_the_stored_key(
    local_run: LocalRun, marks: dict[str, str]
) -> None:
    """The key would go upstream in the gateway's name: a page need not read the answer."""
    response = httpx2.post(
        f"{local_run.gateway}/v1/messages",
        headers={
            "content-type": "text/plain",
            "x-api-key": local_run.gateway_key,
            "anthropic-version": "2023-06-01",
            **marks,
        },
        content=json.dumps(ASK),
    )
    _page_refusal(response)


@pytest.mark.parametrize("marks", PAGE_MARKS)
def test_what_a_page_sends_reaches_no_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, marks: dict[str, str]
) -> None:
    url = make_gateway()
    headers = {"x-api-key": "sk-ant-test-key", "anthropic-version": "2023-06-01", **marks}
    for method, path in [("POST", "/v1/messages"), ("GET", "/v1/models"), ("OPTIONS", "/")]:
        body = json.dumps(ASK) if method == "POST" else None
        _page_refusal(httpx2.request(method, f"{url}{path}", headers=headers, content=body))
    assert upstream.requests == []


def test_api_clients_and_a_typed_url_still_pass(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    """The SDKs, Claude Code and curl send neither mark; `Sec-Fetch-Site: none` is a URL the
    developer typed into the address bar, no page's request."""
    url = make_gateway()
    assert sdk(url).messages.create(**ASK).content
    with sdk(url).messages.stream(**ASK) as stream:
        assert stream.get_final_message().content
    typed = httpx2.get(f"{url}/healthz", headers={"sec-fetch-site": "none"})
    assert typed.status_code == 200
    eventually(lambda: len(upstream.requests) == 2)


def _as_host(url: str, host: str, method: str, path: str) -> httpx2.Response:
    headers = {"host": host, "x-api-key": "sk-ant-test-key", "anthropic-version": "2023-06-01"}
    body = json.dumps(ASK) if method == "POST" else None
    return httpx2.request(method, f"{url}{path}", headers=headers, content=body)


HOST_PROBES = [("GET", "/v1/models"), ("POST", "/v1/messages"), ("GET", "/healthz")]


def test_the_local_gateway_answers_no_dns_rebound_host(
    upstream: FakeUpstream, upstream_url: str
) -> None:
    """After a DNS rebinding a page's GET is same-origin: a browser without Fetch Metadata
    marks it with neither header, but its Host is the page's own name."""
    env = {settings.ENV_UPSTREAM_BASE_URL: upstream_url, settings.ENV_UPSTREAM_MAX_RETRIES: "0"}
    with gateway_process(env) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        for host in (f"evil.example:{port}", f"127.0.0.1.nip.io:{port}", f"localhost:{port + 1}"):
            for method, path in HOST_PROBES:
                response = _as_host(url, host, method, path)
                _page_refusal(response)
                assert "Host" in response.json()["error"]["message"]
        assert upstream.requests == []
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"LOCALHOST:{port}"):
            for method, path in HOST_PROBES:
                assert _as_host(url, host, method, path).status_code != 403
        assert sdk(url).messages.create(**ASK).content
        assert sdk(f"http://localhost:{port}").messages.create(**ASK).content
        eventually(lambda: len(upstream.requests) == 3 * 2 + 2)


def test_in_lambda_the_function_url_s_host_passes(
    upstream: FakeUpstream, upstream_url: str, xray: XRayEndpoint, tmp_path: Path
) -> None:
    """run.sh serves on 127.0.0.1 in Lambda too, where the adapter forwards each call with
    the Function URL's Host, and polls the readiness path with Host 127.0.0.1:PORT."""
    env = {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_LAMBDA_TASK_ROOT: str(tmp_path),
        tracing_settings.ENV_XRAY_DAEMON_ADDRESS: xray.address,
    }
    with gateway_process(env) as (url, _):
        port = url.rsplit(":", 1)[1]
        for host in ("abcdefghij.lambda-url.us-east-1.on.aws", f"127.0.0.1:{port}"):
            for method, path in HOST_PROBES:
                assert _as_host(url, host, method, path).status_code != 403
        eventually(lambda: len(upstream.requests) == 2 * 2)
