"""Readiness means ready (issue 13): /healthz is 200 only once a call would find
everything built and read, and the first call then makes no AWS read.

The gateway is a real child process; its SSM and Secrets Manager are a proxy
in front of the session's moto server (tests/support/aws.py) that records every
call and can hold one unanswered until the test releases it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx2
import pytest
from policy_gateway import settings

from .conftest import KEYS_SECRET, UPSTREAM_KEY, UPSTREAM_SECRET, PutSecret
from .support.aws import AWSProxy, gateway_env, wait_until
from .support.client import policy_chain
from .support.fake_upstream import MODEL, FakeUpstream
from .support.servers import gateway_process

PARAMETER = settings.DEFAULT_POLICY_CONFIG_PARAMETER
GATEWAY_KEY = "gk-readiness-test"
GET_PARAMETERS = "AmazonSSM.GetParameters"
GET_SECRET = "secretsmanager.GetSecretValue"
REWRITE = policy_chain(("rewrite_model", {"map": {MODEL: "claude-rewritten"}}))
# Response hooks only (the tool policies check requests too: server tools, MCP servers).
RESPONSE_ONLY = policy_chain(
    ("string_replace", {"replacements": [["internal", "[codename]"]], "apply_to": "response"})
)


def healthz(url: str) -> httpx2.Response | None:
    """The /healthz answer, or None while the server is not listening yet."""
    try:
        return httpx2.get(f"{url}/healthz", timeout=5)
    except httpx2.TransportError:
        return None


def test_healthz_is_not_ready_before_the_chain_is_read(
    aws_proxy: tuple[AWSProxy, str], upstream_url: str, ssm: Any
) -> None:
    proxy, aws_url = aws_proxy
    ssm.put_parameter(Name=PARAMETER, Value=RESPONSE_ONLY, Type="String", Overwrite=True)
    proxy.hold()
    with gateway_process(gateway_env(upstream_url, aws_url), ready=False) as (url, _):
        wait_until(lambda: proxy.operations == [GET_PARAMETERS])
        # The chain's read is held: the server answers, but not ready.
        for _ in range(3):
            answer = healthz(url)
            assert answer is not None
            assert answer.status_code == 503
            assert answer.json() == {
                "type": "error",
                "error": {
                    "type": "api_error",
                    "message": "The gateway is starting; try again shortly.",
                },
            }
        proxy.release()
        wait_until(lambda: (answer := healthz(url)) is not None and answer.status_code == 200)
        ready_at = time.monotonic()
        (read,) = proxy.calls
        assert read.answered is not None
        assert read.answered < ready_at


@pytest.mark.parametrize(
    ("mode", "chain", "reads"),
    [
        # gateway_key mode: chain and flag in one call, and both secrets.
        (settings.AUTH_GATEWAY_KEY, REWRITE, [GET_PARAMETERS] + [GET_SECRET] * 2),
        # Passthrough means no secrets; the flag comes with the chain, in the same call.
        (settings.AUTH_PASSTHROUGH, RESPONSE_ONLY, [GET_PARAMETERS]),
    ],
    ids=["gateway_key-fallback-possible", "passthrough-no-fallback"],
)
def test_the_first_call_makes_no_aws_read(
    aws_proxy: tuple[AWSProxy, str],
    upstream: FakeUpstream,
    upstream_url: str,
    ssm: Any,
    put_secret: PutSecret,
    mode: str,
    chain: str,
    reads: list[str],
) -> None:
    proxy, aws_url = aws_proxy
    ssm.put_parameter(Name=PARAMETER, Value=chain, Type="String", Overwrite=True)
    ssm.put_parameter(
        Name=settings.DEFAULT_FLAG_PARAMETER, Value="false", Type="String", Overwrite=True
    )
    put_secret(KEYS_SECRET, json.dumps({"keys": [GATEWAY_KEY]}))
    put_secret(UPSTREAM_SECRET, UPSTREAM_KEY)
    env = gateway_env(
        upstream_url,
        aws_url,
        **{
            settings.ENV_AUTH_MODE: mode,
            settings.ENV_GATEWAY_KEYS_SECRET: KEYS_SECRET,
            settings.ENV_UPSTREAM_API_KEY_SECRET: UPSTREAM_SECRET,
        },
    )
    with gateway_process(env) as (url, _):
        assert sorted(proxy.operations) == sorted(reads)
        assert all(call.answered is not None for call in proxy.calls)
        client = anthropic.Anthropic(base_url=url, api_key=GATEWAY_KEY, max_retries=0)
        client.messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hello"}]
        )
        with client.messages.stream(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hello"}]
        ) as stream:
            stream.get_final_message()
    assert len(upstream.requests) == 2
    assert sorted(proxy.operations) == sorted(reads)
