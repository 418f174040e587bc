"""Chains per caller: the caller and its groups in the policy API, and which chain a call gets.

Through the real gateway in gateway_key mode: each key's caller (its name)
and groups (the keys secret's `"groups"`) reach PolicyContext on every route
that runs the chain, and the chain document's `"callers"` picks the chain: the
exact caller's, else its first listed group's, else the default.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from gateway_policies import PolicyConfigError, load_document
from gateway_policies.detect import catalogue_version
from policy_gateway import names, settings
from policy_gateway.auth.authenticator import key_caller
from policy_gateway.auth.gateway_keys import SecretFormatError, parse_gateway_keys

from .conftest import KEYS_SECRET, UPSTREAM_KEY, UPSTREAM_SECRET, PutSecret
from .support.client import HEADERS, request_body
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import USER, ask, both, client, reject_the_rewrite, tagged_rewrite

TAG = "tests.support.policies:Tag"
KEYS = {
    "keys": [
        {"name": "alice", "key": "gk-alice-0123456789abcdef", "groups": ["contractors"]},
        {"name": "bob", "key": "gk-bob-0123456789abcdef"},
        {"name": "carol", "key": "gk-carol-0123456789abcdef", "groups": ["interns", "contractors"]},
        {"name": "erin", "key": "gk-erin-0123456789abcdef", "groups": ["contractors"]},
        {"name": "dave", "key": "gk-dave-0123456789abcdef", "groups": ["evals"]},
        "gk-bare-0123456789abcdef",
    ]
}


def tagged(tag: str) -> dict[str, Any]:
    return {"policies": [{"policy": TAG, "options": {"tag": tag}}]}


DOCUMENT = {
    **tagged("default"),
    "callers": {
        "bob": tagged("bob"),
        "erin": tagged("erin"),
        "group:contractors": tagged("contractors"),
    },
}


def stamp(upstream: FakeUpstream) -> str:
    return str(upstream.requests[-1].json["metadata"]["user_id"])


@pytest.fixture
def callers_gateway(make_gateway: GatewayFactory, put_secret: PutSecret) -> str:
    put_secret(KEYS_SECRET, json.dumps(KEYS))
    put_secret(UPSTREAM_SECRET, json.dumps({"api_key": UPSTREAM_KEY}))
    return make_gateway(
        auth_mode=settings.AUTH_GATEWAY_KEY,
        gateway_keys_secret=KEYS_SECRET,
        upstream_api_key_secret=UPSTREAM_SECRET,
        policy_config=json.dumps(DOCUMENT),
    )


@pytest.mark.parametrize(
    ("key", "expected", "chain"),
    [
        ("gk-bob-0123456789abcdef", "bob|bob|", "bob"),
        ("gk-erin-0123456789abcdef", "erin|erin|contractors", "erin"),
        ("gk-alice-0123456789abcdef", "contractors|alice|contractors", "group:contractors"),
        (
            "gk-carol-0123456789abcdef",
            "contractors|carol|interns,contractors",
            "group:contractors",
        ),
        ("gk-dave-0123456789abcdef", "default|dave|evals", "default"),
        ("gk-bare-0123456789abcdef", "default|key-5|", "default"),
    ],
    ids=["own-chain", "own-chain-beats-group", "group", "first-group-with-a-chain", "none", "bare"],
)
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_each_key_gets_its_callers_chain_and_the_call_line_names_it(
    callers_gateway: str,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    key: str,
    expected: str,
    chain: str,
    streaming: bool,
) -> None:
    ask(client(callers_gateway, api_key=key), streaming)
    assert stamp(upstream) == expected
    finished = [
        line
        for line in json_lines_until(gateway_stdout, 1)
        if line.get("message") == "call finished"
    ]
    assert finished[-1]["chain"] == chain
    assert finished[-1]["caller"] == expected.split("|")[1]


def json_lines_until(stdout: GatewayStdout, calls: int) -> list[dict[str, Any]]:
    stdout.until(lambda text: text.count('"call finished"') >= calls)
    return stdout.lines()


def test_one_document_has_one_version_whichever_chain_and_its_load_names_the_callers(
    gateway_stdout: GatewayStdout, callers_gateway: str, upstream: FakeUpstream
) -> None:
    ask(client(callers_gateway, api_key="gk-bob-0123456789abcdef"), False)
    ask(client(callers_gateway, api_key="gk-dave-0123456789abcdef"), True)
    digest = hashlib.sha256(json.dumps(DOCUMENT).encode()).hexdigest()[:8]
    version = f"inline:{digest}.r{catalogue_version()[:8]}"
    finished = [
        (line["chain"], line["chain_version"])
        for line in json_lines_until(gateway_stdout, 2)
        if line.get("message") == "call finished"
    ]
    assert finished == [("bob", version), ("default", version)]
    (loaded,) = [
        line
        for line in gateway_stdout.lines()
        if line.get("message") == names.LOG_POLICY_CHAIN_LOADED
    ]
    assert (loaded["chain_version"], loaded["policies"], loaded["callers"]) == (
        version,
        ["Tag"],
        ["bob", "erin", "group:contractors"],
    )


def test_count_tokens_and_batch_entries_get_the_callers_chain_too(
    callers_gateway: str, upstream: FakeUpstream
) -> None:
    headers = {**HEADERS, "x-api-key": "gk-alice-0123456789abcdef"}
    counted = httpx2.post(
        f"{callers_gateway}/v1/messages/count_tokens", json=request_body(), headers=headers
    )
    assert counted.status_code == 200, counted.text
    assert stamp(upstream) == "contractors|alice|contractors"
    batch = {"requests": [{"custom_id": "one", "params": request_body()}]}
    created = httpx2.post(f"{callers_gateway}/v1/messages/batches", json=batch, headers=headers)
    assert created.status_code == 200, created.text
    (entry,) = upstream.requests[-1].json["requests"]
    assert entry["params"]["metadata"]["user_id"] == "contractors|alice|contractors"


def test_in_passthrough_mode_the_caller_is_the_forwarded_keys_digest(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    mine, other = "sk-ant-mine-0123456789abcdef", "sk-ant-other-0123456789abcdef"
    document = {**tagged("default"), "callers": {key_caller(mine.encode()): tagged("mine")}}
    url = make_gateway(policy_config=json.dumps(document))
    ask(client(url, api_key=mine), False)
    assert stamp(upstream) == f"mine|{key_caller(mine.encode())}|"
    ask(client(url, api_key=other), False)
    assert stamp(upstream) == f"default|{key_caller(other.encode())}|"


def test_groups_in_the_keys_secret_are_validated_and_every_old_shape_still_parses() -> None:
    parsed = parse_gateway_keys(json.dumps(KEYS))
    assert [(key.name, key.groups) for key in parsed][:3] == [
        ("alice", ("contractors",)),
        ("bob", ()),
        ("carol", ("interns", "contractors")),
    ]
    for groups in ["contractors", [""], ["  "], [1], None]:
        with pytest.raises(SecretFormatError, match="groups must be a list of non-empty strings"):
            parse_gateway_keys(
                json.dumps([{"name": "x", "key": "gk-x-0123456789abcdef", "groups": groups}])
            )
    assert parse_gateway_keys(json.dumps({"name": "default", "key": "gk-0123456789abcdef"}))


def test_the_document_resolves_exact_caller_then_first_group_then_default() -> None:
    document = load_document(DOCUMENT)
    assert document.resolve("bob").name == "bob"
    assert document.resolve("erin", ["contractors"]).name == "erin"
    assert document.resolve("alice", ["interns", "contractors"]).name == "group:contractors"
    assert document.resolve("zed", ["interns"]).name == "default"
    assert document.resolve(None).name == "default"


@pytest.mark.parametrize(
    ("callers", "problem"),
    [
        ({"bob": {"policies": [{"policy": "no_such_policy"}]}}, "callers['bob'].policies[0]"),
        ({"bob": [{"policy": "noop"}]}, "callers['bob'] must be an object"),
        ({"bob": {"policies": [], "extra": 1}}, "callers['bob'] has unknown keys"),
        ({"group:": {"policies": []}}, "must not be empty"),
        ([], "callers must be an object"),
    ],
    ids=["bad-policy", "not-an-object", "unknown-key", "empty-group", "not-a-mapping"],
)
def test_every_chain_of_the_document_is_validated(callers: object, problem: str) -> None:
    with pytest.raises(PolicyConfigError) as refused:
        load_document({"policies": [], "callers": callers})
    assert problem in str(refused.value)


def test_the_fallback_judges_the_callers_own_chain(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    """A non-bypassable policy in one caller's chain holds the fallback for that caller only."""
    set_flag("true")
    guarded, plain = "sk-ant-guarded-0123456789abcdef", "sk-ant-plain-0123456789abcdef"
    rewrite = {"policy": "rewrite_model", "options": {"map": {MODEL: "claude-retired"}}}
    document = {
        "policies": [rewrite],
        "callers": {
            key_caller(guarded.encode()): {
                "policies": [rewrite, {"policy": "tests.support.policies:GuardedRewrite"}]
            }
        },
    }
    url = make_gateway(policy_config=json.dumps(document))
    upstream.script(Reply.error(404, "not_found_error"))
    with pytest.raises(anthropic.NotFoundError):
        ask(client(url, api_key=guarded), False)
    assert len(upstream.requests) == 1
    upstream.script(Reply.error(404, "not_found_error"))
    ask(client(url, api_key=plain), False)
    assert [r.json["model"] for r in upstream.requests[1:]] == ["claude-retired", MODEL]


ROLE = "arn:aws:iam::123456789012:role/agents"


def session_of(role: str) -> str:
    """The ARN Lambda names a caller signed with a session of `role` by."""
    return role.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/") + "/run-1"


def signed_by(role: str) -> tuple[str, str]:
    """The request context Lambda's adapter sends for a caller signed as a session of `role`."""
    iam = {"userArn": session_of(role), "userId": "AROAEXAMPLE:run-1"}
    return ("x-amzn-request-context", json.dumps({"requestId": "r", "authorizer": {"iam": iam}}))


@both
def test_behind_an_iam_url_a_gateway_key_names_the_caller_for_chain_and_budget(
    make_gateway: GatewayFactory,
    put_secret: PutSecret,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    """Issue 31, item 7: with AuthType AWS_IAM and gateway keys, the signed role once became
    the caller, so the key's group chain never applied and every key behind one role shared
    one budget. The key names the caller; the signed principal is logged beside it."""
    set_flag("true")
    upstream.rules = reject_the_rewrite
    put_secret(KEYS_SECRET, json.dumps(KEYS))
    put_secret(UPSTREAM_SECRET, json.dumps({"api_key": UPSTREAM_KEY}))
    document = {
        **tagged_rewrite("default"),
        "callers": {ROLE: tagged_rewrite("role"), "group:contractors": tagged_rewrite("group")},
    }
    url = make_gateway(
        auth_mode=settings.AUTH_GATEWAY_KEY,
        gateway_keys_secret=KEYS_SECRET,
        upstream_api_key_secret=UPSTREAM_SECRET,
        policy_config=json.dumps(document),
        fallback_budget=1,
        trust_lambda_context=True,
    )
    other_role = "arn:aws:iam::123456789012:role/batch"
    calls = [
        ("gk-alice-0123456789abcdef", ROLE),
        ("gk-bob-0123456789abcdef", ROLE),
        ("gk-alice-0123456789abcdef", other_role),
    ]
    outcomes = []
    for key, role in calls:
        before = len(upstream.requests)
        response = httpx2.post(
            f"{url}/v1/messages",
            json=request_body(USER, stream=streaming),
            headers=[*{**HEADERS, "x-api-key": key}.items(), signed_by(role)],
        )
        sent = upstream.requests[before]
        assert sent.headers["x-api-key"] == UPSTREAM_KEY
        stamped = sent.json["metadata"]["user_id"]
        outcomes.append((response.status_code, len(upstream.requests) - before, stamped))
    # Each key its own chain and its own budget of one, whichever role signed.
    assert outcomes == [
        (200, 2, "group|alice|contractors"),
        (200, 2, "default|bob|"),
        (400, 1, "group|alice|contractors"),
    ]
    finished = [
        line
        for line in json_lines_until(gateway_stdout, 3)
        if line.get("message") == "call finished"
    ]
    assert [(line["caller"], line["chain"], line["fallback"]) for line in finished] == [
        ("alice", "group:contractors", "succeeded"),
        ("bob", "default", "succeeded"),
        ("alice", "group:contractors", "denied"),
    ]
    assert [line["principal"] for line in finished] == [session_of(role) for _, role in calls]
