"""What tells a web page's request apart, and what the embedded AWS stand-in admits: the pure
checks behind test_web_pages.py, case by case (and the Hosts a loopback `serve` answers)."""

from __future__ import annotations

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from policy_gateway.auth.web_pages import loopback_hosts, made_by_a_web_page
from policy_gateway.local.aws_standin import SignedLocalOnly

pytestmark = pytest.mark.unit

PORT = 8787


@pytest.mark.parametrize(
    ("origin", "fetch_site", "page"),
    [
        (None, None, False),  # the SDKs, Claude Code, curl
        (None, "none", False),  # a URL the user typed
        (None, " None ", False),
        ("https://evil.example", None, True),
        ("null", None, True),  # a sandboxed frame, a file: page
        ("", None, True),
        (None, "cross-site", True),
        (None, "same-site", True),
        (None, "same-origin", True),
        (None, "", True),
    ],
)
def test_a_page_is_told_by_origin_or_a_fetch_site_other_than_none(
    origin: str | None, fetch_site: str | None, page: bool
) -> None:
    assert made_by_a_web_page(origin, fetch_site) is page


def _signed(host: str) -> str:
    request = AWSRequest("POST", f"http://{host}/", data=b"{}", headers={"x-amz-target": "x"})
    SigV4Auth(Credentials("local", "local"), "ssm", "us-east-1").add_auth(request)
    return str(request.headers["Authorization"])


def _refusal(host: str, authorization: str, **extra: str) -> str | None:
    environ = {"HTTP_HOST": host, "HTTP_AUTHORIZATION": authorization, **extra}
    return SignedLocalOnly(lambda environ, start_response: [], PORT).refusal(environ)


@pytest.mark.parametrize("host", [f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"LocalHost:{PORT}"])
def test_botocore_s_signature_for_the_stand_in_s_own_address_is_admitted(host: str) -> None:
    assert _refusal(host, _signed(host)) is None


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:8787",
        "127.0.0.1.nip.io:8787",
        "localhost.evil.example:8787",
        "127.0.0.1",
        "127.0.0.1:8788",
        "[::1]:8787",
        "",
    ],
)
def test_any_other_host_is_refused(host: str) -> None:
    refusal = _refusal(host, _signed(f"127.0.0.1:{PORT}"))
    assert refusal is not None
    assert "Host" in refusal


@pytest.mark.parametrize(
    "authorization",
    [
        "",
        "Bearer sk-ant-x",
        "AWS4-HMAC-SHA256",
        "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/ssm/aws4_request",
        "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/ssm/aws4_request, "
        "SignedHeaders=host, Signature=nothex",
        "AWS AKIDEXAMPLE:signature",  # SigV2
    ],
)
def test_anything_but_a_sigv4_shape_is_refused(authorization: str) -> None:
    refusal = _refusal(f"127.0.0.1:{PORT}", authorization)
    assert refusal is not None
    assert "SigV4" in refusal


def test_a_signed_request_a_page_made_is_refused() -> None:
    host = f"127.0.0.1:{PORT}"
    refusal = _refusal(host, _signed(host), HTTP_ORIGIN="https://evil.example")
    assert refusal is not None
    assert "web page" in refusal


@pytest.mark.parametrize(
    ("listen", "hosts"),
    [
        ("127.0.0.1", {"127.0.0.1:8080", "localhost:8080"}),
        ("127.0.0.2", {"127.0.0.2:8080", "localhost:8080"}),
        ("::1", {"[::1]:8080", "localhost:8080"}),
        ("localhost", {"localhost:8080", "127.0.0.1:8080", "[::1]:8080"}),
        ("0.0.0.0", set()),
        ("::", set()),
        ("10.0.0.5", set()),
        ("gateway.internal", set()),
    ],
)
def test_only_a_loopback_listen_address_restricts_the_host(listen: str, hosts: set[str]) -> None:
    assert loopback_hosts(listen, 8080) == hosts


def test_on_port_80_a_host_without_a_port_names_it_too() -> None:
    assert loopback_hosts("127.0.0.1", 80) == {
        "127.0.0.1:80",
        "localhost:80",
        "127.0.0.1",
        "localhost",
    }
