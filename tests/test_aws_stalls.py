"""SSM and Secrets Manager that accept and never answer (issue 9, item 7).

The gateway is a real child process whose AWS endpoints are a proxy in front
of the session's moto server (tests/support/aws.py); `hold()` turns that
proxy into a stalled endpoint. The first test's TTLs of 0 make every call
find every cached value expired, so no test waits for a TTL.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import pytest
from policy_gateway import settings
from policy_gateway.aws_reads import TOTAL_ATTEMPTS
from policy_gateway.parameters import READ_DEADLINE_SECONDS, REFRESH_WAIT_SECONDS

from .conftest import KEYS_SECRET, UPSTREAM_KEY, UPSTREAM_SECRET, PutSecret
from .support.aws import AWSProxy, gateway_env
from .support.client import policy_chain
from .support.fake_upstream import MODEL, FakeUpstream
from .support.sdk import sdk
from .support.servers import gateway_process

PARAMETER = settings.DEFAULT_POLICY_CONFIG_PARAMETER
REWRITTEN = "claude-model-from-ssm"
CHAIN = policy_chain(("rewrite_model", {"map": {MODEL: REWRITTEN}}))
GATEWAY_KEY = "gk-stall-test-0123456789"
GET_PARAMETERS = "AmazonSSM.GetParameters"
# What a call through a healthy gateway may take on a busy machine, on top of
# the bound under test.
SLACK = 1.0


def ask(client: anthropic.Anthropic) -> None:
    client.messages.create(
        model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hello"}]
    )


def test_stalled_ssm_and_secrets_manager_never_hold_a_call_once_values_loaded(
    aws_proxy: tuple[AWSProxy, str], upstream: FakeUpstream, upstream_url: str, ssm: Any,
    put_secret: PutSecret,
) -> None:  # fmt: skip
    proxy, aws_url = aws_proxy
    ssm.put_parameter(Name=PARAMETER, Value=CHAIN, Type="String", Overwrite=True)
    put_secret(KEYS_SECRET, json.dumps({"keys": [GATEWAY_KEY]}))
    put_secret(UPSTREAM_SECRET, UPSTREAM_KEY)
    env = gateway_env(
        upstream_url,
        aws_url,
        **{
            settings.ENV_AUTH_MODE: settings.AUTH_GATEWAY_KEY,
            settings.ENV_GATEWAY_KEYS_SECRET: KEYS_SECRET,
            settings.ENV_UPSTREAM_API_KEY_SECRET: UPSTREAM_SECRET,
            settings.ENV_SECRETS_TTL: "0",
            settings.ENV_POLICY_CONFIG_TTL: "0",
        },
    )
    with gateway_process(env) as (url, _):
        client = anthropic.Anthropic(base_url=url, api_key=GATEWAY_KEY, max_retries=0)
        ask(client)
        proxy.hold()
        held_from = len(proxy.calls)
        for _ in range(4):
            started = time.monotonic()
            ask(client)
            # Chain, gateway keys and Anthropic key all expired, all stalled:
            # each waits at most the refresh wait, and they wait together.
            assert time.monotonic() - started < REFRESH_WAIT_SECONDS + SLACK
    stalled = proxy.calls[held_from:]
    # One refresh per value however many calls found it expired (a second
    # request per value is botocore's second attempt of that one read).
    assert 3 <= len(stalled) <= 3 * TOTAL_ATTEMPTS
    assert sorted({call.operation for call in stalled}) == [
        GET_PARAMETERS,
        "secretsmanager.GetSecretValue",
    ]
    # Every call was served with the values read before the stall.
    assert len(upstream.requests) == 5
    assert {request.json["model"] for request in upstream.requests} == {REWRITTEN}
    assert {request.headers["x-api-key"] for request in upstream.requests} == {UPSTREAM_KEY}


def test_a_first_read_from_a_stalled_ssm_gives_up_within_the_bound_and_fails_closed(
    aws_proxy: tuple[AWSProxy, str], upstream: FakeUpstream, upstream_url: str, ssm: Any
) -> None:
    proxy, aws_url = aws_proxy
    ssm.put_parameter(Name=PARAMETER, Value=CHAIN, Type="String", Overwrite=True)
    proxy.hold()
    with gateway_process(gateway_env(upstream_url, aws_url)) as (url, _):
        with pytest.raises(anthropic.InternalServerError) as caught:
            ask(sdk(url))
        answered = time.monotonic()
    assert caught.value.status_code == 500
    assert caught.value.body == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": "The gateway has no valid policy configuration, so it refuses "
            "requests until an operator fixes it.",
        },
    }
    assert upstream.requests == []
    # The read gave up within its deadline, after exactly the attempts the docs state.
    assert answered - proxy.calls[0].received < READ_DEADLINE_SECONDS + SLACK
    assert proxy.operations == [GET_PARAMETERS] * TOTAL_ATTEMPTS
