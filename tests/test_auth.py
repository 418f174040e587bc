"""Auth modes: gateway keys checked against Secrets Manager (moto), the Anthropic key held by
the gateway, rotation, and what happens when Secrets Manager misbehaves."""

from __future__ import annotations

import json
from collections.abc import Callable

import anthropic
import anyio
import httpx2
import pytest
from botocore.exceptions import ClientError
from policy_gateway import names, settings
from policy_gateway.auth.authenticator import GatewayKeyAuth
from policy_gateway.auth.gateway_keys import SecretFormatError, parse_gateway_keys
from policy_gateway.auth.upstream_key import UpstreamKey
from policy_gateway.errors import GatewayError
from policy_gateway.parameters import RETRY_FIRST_SECONDS

from .conftest import KEYS_SECRET, UPSTREAM_KEY, UPSTREAM_SECRET, PutSecret
from .support.clock import ManualClock, eventually
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import client


def ask(sdk: anthropic.Anthropic) -> str:
    reply = sdk.messages.create(
        model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hello"}]
    )
    return "".join(block.text for block in reply.content if block.type == "text")


@pytest.mark.parametrize(
    "keys",
    [
        {"keys": ["gk-one-0123456789abcdef", "gk-two-0123456789abcdef"]},
        ["gk-one-0123456789abcdef", "gk-two-0123456789abcdef"],
        {"name": "default", "key": "gk-one-0123456789abcdef"},
    ],
    ids=["keys-object", "list", "generated-secret"],
)
@pytest.mark.parametrize(
    "upstream_secret", [UPSTREAM_KEY, json.dumps({"api_key": UPSTREAM_KEY})], ids=["plain", "json"]
)
def test_gateway_key_is_swapped_for_the_upstream_key(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream, keys: object, upstream_secret: str
) -> None:
    url = keyed_gateway(keys, upstream_secret)
    assert ask(client(url, api_key="gk-one-0123456789abcdef")) == "echo: hello"
    assert ask(client(url, auth_token="gk-one-0123456789abcdef")) == "echo: hello"
    for recorded in upstream.requests:
        assert recorded.headers["x-api-key"] == UPSTREAM_KEY
        assert "authorization" not in recorded.headers


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-api-key": "gk-wrong"},
        {"authorization": "Bearer gk-on"},
        {"x-api-key": "gk-one-0123456789abcdef-and-more"},
        {"authorization": "gk-one-0123456789abcdef"},
        {"x-api-key": ""},
    ],
    ids=["missing", "wrong", "prefix", "longer", "no-bearer-scheme", "empty"],
)
def test_wrong_or_missing_key_is_401_without_an_upstream_call(
    keyed_gateway: Callable[..., str],
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    headers: dict[str, str],
) -> None:
    url = keyed_gateway()
    response = httpx2.post(
        f"{url}/v1/messages",
        json={"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
        headers={"anthropic-version": "2023-06-01", **headers},
    )
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
    assert upstream.requests == []
    # The call's metrics are flushed after its response is sent: wait for them.
    eventually(lambda: names.METRIC_AUTH_FAILURES in gateway_stdout.text)
    emitted = gateway_stdout.text
    metrics = [json.loads(line) for line in emitted.splitlines() if '"_aws"' in line]
    assert any(line.get(names.METRIC_AUTH_FAILURES) == [1.0] for line in metrics)


def test_several_keys_rotate_without_downtime(
    keyed_gateway: Callable[..., str], put_secret: PutSecret, clock: ManualClock
) -> None:
    url = keyed_gateway({"keys": ["gk-old-0123456789abcdef"]})
    old, new = (
        client(url, api_key="gk-old-0123456789abcdef"),
        client(url, api_key="gk-new-0123456789abcdef"),
    )
    assert ask(old)
    put_secret(
        KEYS_SECRET, json.dumps({"keys": ["gk-old-0123456789abcdef", "gk-new-0123456789abcdef"]})
    )
    clock.advance(0.4)
    assert ask(old)
    assert ask(new)
    put_secret(KEYS_SECRET, json.dumps({"keys": ["gk-new-0123456789abcdef"]}))
    clock.advance(0.4)
    assert ask(new)
    with pytest.raises(anthropic.AuthenticationError):
        ask(old)


def test_a_secret_never_read_refuses_calls_without_calling_upstream(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    url = keyed_gateway(keys=None)
    with pytest.raises(anthropic.InternalServerError) as caught:
        ask(client(url, api_key="gk-one-0123456789abcdef"))
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert upstream.requests == []


def test_a_secret_created_after_start_is_seen_after_the_short_back_off_not_the_ttl(
    make_gateway: GatewayFactory, put_secret: PutSecret, clock: ManualClock
) -> None:
    """`init --secrets` after `make run`: calls work within seconds, not SECRETS_TTL_SECONDS."""
    put_secret(UPSTREAM_SECRET, UPSTREAM_KEY)
    url = make_gateway(
        auth_mode=settings.AUTH_GATEWAY_KEY,
        gateway_keys_secret=KEYS_SECRET,
        upstream_api_key_secret=UPSTREAM_SECRET,
        secrets_ttl=settings.DEFAULT_SECRETS_TTL,
        clock=clock,
    )
    with pytest.raises(anthropic.InternalServerError):
        ask(client(url, api_key="gk-one-0123456789abcdef"))
    put_secret(KEYS_SECRET, json.dumps({"keys": ["gk-one-0123456789abcdef"]}))
    clock.advance(RETRY_FIRST_SECONDS)
    assert RETRY_FIRST_SECONDS < settings.DEFAULT_SECRETS_TTL
    assert ask(client(url, api_key="gk-one-0123456789abcdef")) == "echo: hello"


def test_empty_keys_never_admit_a_keyless_request(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    with pytest.raises(SecretFormatError):
        parse_gateway_keys(json.dumps({"keys": ["", "  "]}))
    url = keyed_gateway({"keys": ["", "gk-one-0123456789abcdef"]})
    body = {"model": MODEL, "max_tokens": 16, "messages": []}
    assert httpx2.post(f"{url}/v1/messages", json=body).status_code == 401
    assert (
        httpx2.post(f"{url}/v1/messages", json=body, headers={"x-api-key": ""}).status_code == 401
    )
    assert upstream.requests == []


def test_secrets_manager_throttled_keeps_the_last_good_keys() -> None:
    reads = {"count": 0}

    def reader(name: str) -> str:
        reads["count"] += 1
        if reads["count"] > 2:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                "GetSecretValue",
            )
        return json.dumps(["gk-one-0123456789abcdef"]) if name == KEYS_SECRET else UPSTREAM_KEY

    clock = ManualClock()
    key = UpstreamKey(UPSTREAM_SECRET, 0.01, reader, clock)
    auth = GatewayKeyAuth(KEYS_SECRET, key, ttl=0.01, reader=reader, clock=clock)

    async def calls() -> None:
        for _ in range(3):
            credentials = await auth.authorize([(b"x-api-key", b"gk-one-0123456789abcdef")])
            assert credentials.upstream_credential == [("x-api-key", UPSTREAM_KEY)]
            clock.advance(0.02)
        with pytest.raises(GatewayError) as caught:
            await auth.authorize([(b"x-api-key", b"gk-two-0123456789abcdef")])
        assert caught.value.status == 401

    anyio.run(calls)
    assert reads["count"] > 4


def test_upstream_errors_never_echo_credentials(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    url = keyed_gateway()
    upstream.script(
        Reply.error(
            401,
            "authentication_error",
            f"invalid x-api-key: {UPSTREAM_KEY} (gk-one-0123456789abcdef)",
        )
    )
    with pytest.raises(anthropic.AuthenticationError) as caught:
        ask(client(url, api_key="gk-one-0123456789abcdef"))
    message = caught.value.body["error"]["message"]  # type: ignore[index]
    assert UPSTREAM_KEY not in message
    assert "gk-one-0123456789abcdef" not in message
    assert message == "invalid x-api-key: [redacted] ([redacted])"


def test_unknown_auth_mode_stops_the_gateway_at_start() -> None:
    with pytest.raises(ValueError, match="AUTH_MODE"):
        settings.Settings.from_env({settings.ENV_AUTH_MODE: "gatewaykey"})
    assert settings.Settings.from_env({}).auth_mode == settings.AUTH_PASSTHROUGH


def test_a_gateway_key_in_the_query_string_never_reaches_upstream(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    url = keyed_gateway()
    sdk = anthropic.Anthropic(
        base_url=url,
        api_key="gk-one-0123456789abcdef",
        max_retries=0,
        default_query={"key": "gk-one-0123456789abcdef"},
    )
    assert ask(sdk) == "echo: hello"
    [recorded] = upstream.requests
    assert "gk-one-0123456789abcdef" not in recorded.query
    assert recorded.query.startswith("key=")


def test_named_keys_admit_their_holders_and_the_log_names_the_caller(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    keys = {
        "keys": [{"name": "alice", "key": "gk-alice-0123456789abcdef"}, "gk-bare-0123456789abcdef"]
    }
    url = keyed_gateway(keys)
    assert ask(client(url, api_key="gk-alice-0123456789abcdef")) == "echo: hello"
    assert ask(client(url, auth_token="gk-bare-0123456789abcdef")) == "echo: hello"
    gateway_stdout.until(lambda text: text.count("call finished") >= 2)
    finished = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    assert [line["caller"] for line in finished] == ["alice", "key-1"]
    assert "gk-alice-0123456789abcdef" not in gateway_stdout.text
    assert "gk-bare-0123456789abcdef" not in gateway_stdout.text
