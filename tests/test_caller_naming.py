"""The fallback budget follows the caller the upstream authenticates, not a name the caller picks.

Issue 21, item 2: in passthrough mode a throwaway `Authorization: Bearer junk-N`
before the real `x-api-key` (with `Connection: authorization`, so the junk was
dropped as hop-by-hop) named a fresh caller on every call; under AWS_IAM a new
role session per call did the same. Both walk-arounds run here through the real
gateway, the fake upstream refusing exactly the policy's rewrite.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx2
import pytest
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.fallback.budget import REASON_BUDGET
from policy_gateway.headers import RELIED_ON
from policy_gateway.names import METRIC_FALLBACK_DENIED as METRIC

from .support.fake_upstream import MODEL, FakeUpstream
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import REJECTED, REPLACE, USER, both, reject_the_rewrite, tagged_rewrite
from .support.servers import json_lines

KEY = "sk-ant-the-real-key-0123456789"
OTHER_KEY = "sk-ant-another-key-9876543210"
GATEWAY_KEY = "gk-one-0123456789abcdef"
ACCOUNT = "123456789012"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/agents"


@pytest.fixture
def rejecting(upstream: FakeUpstream, set_flag: Callable[[str], None]) -> FakeUpstream:
    set_flag("true")
    upstream.rules = reject_the_rewrite
    return upstream


def post(url: str, headers: list[tuple[str, str]], *, stream: bool = False) -> httpx2.Response:
    return httpx2.post(
        f"{url}/v1/messages",
        headers=[("anthropic-version", "2023-06-01"), *headers],
        json={
            "model": MODEL,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": USER}],
            "stream": stream,
        },
        timeout=30,
    )


def fell_back(upstream: FakeUpstream, before: int) -> bool:
    """Whether the call since `before` ended in the unmodified resend."""
    return len(upstream.requests) - before == 2


def test_junk_bearer_with_connection_trick_gets_no_fresh_budget(
    make_gateway: GatewayFactory, rejecting: FakeUpstream
) -> None:
    upstream = rejecting
    url = make_gateway(policy_config=REPLACE, fallback_budget=2)
    for _ in range(2):
        before = len(upstream.requests)
        assert post(url, [("x-api-key", KEY)]).status_code == 200
        assert fell_back(upstream, before)
    before = len(upstream.requests)
    tricks = [
        post(
            url,
            [
                ("authorization", f"Bearer junk-{n}-0123456789abcdef"),
                ("connection", "authorization"),
                ("x-api-key", KEY),
            ],
        )
        for n in range(6)
    ]
    assert [response.status_code for response in tricks] == [401] * 6
    assert {response.json()["error"]["type"] for response in tricks} == {"authentication_error"}
    assert len(upstream.requests) == before
    # The budget the real key spent is still spent.
    refused = post(url, [("x-api-key", KEY)])
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == REJECTED


@pytest.mark.parametrize(
    "headers",
    [
        [("authorization", f"Bearer {OTHER_KEY}"), ("x-api-key", KEY)],
        [("authorization", f"Basic {OTHER_KEY}"), ("x-api-key", KEY)],
        [("x-api-key", KEY), ("x-api-key", OTHER_KEY)],
        [("x-api-key", KEY), ("x-api-key", KEY)],
        [("authorization", f"Bearer {KEY}"), ("authorization", f"Bearer {KEY}")],
        [("x-api-key", KEY), ("connection", "x-api-key")],
        [("x-api-key", KEY), ("connection", "keep-alive, Anthropic-Version")],
        [("x-api-key", KEY), ("connection", "anthropic-beta")],
    ],
    ids=[
        "bearer-and-key-differ",
        "other-scheme-and-key-differ",
        "two-keys",
        "key-twice",
        "bearer-twice",
        "connection-names-the-key",
        "connection-names-the-version",
        "connection-names-the-beta",
    ],
)
def test_ambiguous_credentials_are_refused_401_before_any_upstream_call(
    make_gateway: GatewayFactory, upstream: FakeUpstream, headers: list[tuple[str, str]]
) -> None:
    url = make_gateway()
    response = post(url, headers)
    assert response.status_code == 401
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "authentication_error"
    assert KEY not in response.text
    assert OTHER_KEY not in response.text
    assert upstream.requests == []


def test_the_relied_on_list_holds_the_credentials_and_the_api_headers() -> None:
    assert {"x-api-key", "authorization", "anthropic-version", "anthropic-beta"} <= RELIED_ON


def test_the_caller_is_the_credential_the_upstream_gets(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway()
    same_in_both = [("x-api-key", KEY), ("authorization", f"Bearer {KEY}")]
    assert post(url, same_in_both).status_code == 200
    assert post(url, [("authorization", f"Bearer {OTHER_KEY}")]).status_code == 200
    # A hop-by-hop header of the client's own is still fine.
    assert post(url, [("x-api-key", KEY), ("connection", "x-private")]).status_code == 200
    lines = json_lines(gateway_stdout.until(lambda text: text.count('"call finished"') == 3))
    finished = [line for line in lines if line.get("message") == "call finished"]
    assert [line["caller"] for line in finished] == [
        key_caller(KEY.encode()),
        key_caller(OTHER_KEY.encode()),
        key_caller(KEY.encode()),
    ]
    assert [request.headers.get("x-api-key") for request in upstream.requests] == [KEY, None, KEY]


def iam_context(session_arn: str) -> str:
    return json.dumps({"requestId": "url-req", "authorizer": {"iam": {"userArn": session_arn}}})


def test_a_new_role_session_per_call_gets_no_fresh_budget(
    make_gateway: GatewayFactory, rejecting: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    upstream = rejecting
    # As in Lambda, where only the adapter can set the request-context header.
    url = make_gateway(policy_config=REPLACE, fallback_budget=1, trust_lambda_context=True)
    sessions = [f"arn:aws:sts::{ACCOUNT}:assumed-role/agents/run-{n}" for n in range(4)]
    fallbacks = []
    for session in sessions:
        before = len(upstream.requests)
        response = post(url, [("x-api-key", KEY), ("x-amzn-request-context", iam_context(session))])
        fallbacks.append((response.status_code, fell_back(upstream, before)))
    assert fallbacks == [(200, True)] + [(400, False)] * 3
    lines = json_lines(gateway_stdout.until(lambda text: text.count('"call finished"') == 4))
    finished = [line for line in lines if line.get("message") == "call finished"]
    assert [line["caller"] for line in finished] == [ROLE_ARN] * 4
    assert [line["principal"] for line in finished] == sessions
    denied = [line for line in lines if str(line.get("message")).startswith("passthrough fallback")]
    assert denied
    assert {line["caller"] for line in denied} == {ROLE_ARN}


FEDERATED = f"arn:aws:sts::{ACCOUNT}:federated-user"
"""Every federated user of ACCOUNT, as one caller."""


@both
def test_federated_users_share_their_accounts_budget_and_chain(
    make_gateway: GatewayFactory,
    rejecting: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    """Issue 31, item 4: GetFederationToken takes any name its caller likes; four names
    once got four fallbacks with a budget of one, and a name could pick its chain."""
    upstream = rejecting
    document = {
        **tagged_rewrite("default"),
        "callers": {
            FEDERATED: tagged_rewrite("account"),
            f"{FEDERATED}/admin": tagged_rewrite("admin"),
        },
    }
    url = make_gateway(
        policy_config=json.dumps(document), fallback_budget=1, trust_lambda_context=True
    )
    users = [f"{FEDERATED}/{name}" for name in ("alice", "admin", "run-3", "bob@example.com")]
    outcomes = []
    for user in users:
        before = len(upstream.requests)
        context = ("x-amzn-request-context", iam_context(user))
        response = post(url, [("x-api-key", KEY), context], stream=streaming)
        sent = upstream.requests[before].json["metadata"]["user_id"]
        outcomes.append((response.status_code, fell_back(upstream, before), sent))
    chain = f"account|{FEDERATED}|"
    assert outcomes == [(200, True, chain)] + [(400, False, chain)] * 3
    lines = json_lines(gateway_stdout.until(lambda text: text.count('"call finished"') == 4))
    finished = [line for line in lines if line.get("message") == "call finished"]
    assert [(line["caller"], line["chain"]) for line in finished] == [(FEDERATED, FEDERATED)] * 4
    assert [line["principal"] for line in finished] == users
    assert [line["fallback"] for line in finished] == ["succeeded"] + ["denied"] * 3
    denied = [line for line in lines if line.get("reason") == REASON_BUDGET]
    assert [line["caller"] for line in denied] == [FEDERATED] * 3
    assert sum(len(line[METRIC]) for line in lines if METRIC in line) == 3


def test_a_principal_of_no_known_form_is_refused_before_any_upstream_call(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway(trust_lambda_context=True)
    odd = f"arn:aws:sts::{ACCOUNT}:assumed-role/service-role/agents/run-1"
    response = post(url, [("x-api-key", KEY), ("x-amzn-request-context", iam_context(odd))])
    assert response.status_code == 403
    assert response.json()["error"]["type"] == "permission_error"
    assert upstream.requests == []
    lines = json_lines(gateway_stdout.until(lambda text: '"call finished"' in text))
    (finished,) = [line for line in lines if line.get("message") == "call finished"]
    assert finished["principal"] == odd
    assert "caller" not in finished


def test_a_connection_header_naming_a_relied_on_header_is_refused_with_gateway_keys_too(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    url = keyed_gateway()
    key = [("x-api-key", GATEWAY_KEY)]
    assert post(url, key).status_code == 200
    for named in ("authorization", "anthropic-version", "content-type"):
        response = post(url, [*key, ("connection", named)])
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"
        assert named in response.json()["error"]["message"]
    assert len(upstream.requests) == 1
