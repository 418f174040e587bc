"""Parameter Store past its quota (issue 34, item 8): calls keep being served.

The gateway runs in process on an injected clock; its SSM endpoint is the
recording proxy of tests/support/aws.py in front of moto, which answers a share
of the calls ThrottlingException as AWS does past its rate quota. The flag and
the chain are read in one GetParameters call per refresh; a throttled refresh
turns the flag off (fail-closed) while the chain keeps its last good version,
and a change still arrives, a few back-offs late. That throttled environments
do not retry in lockstep is test_parameters.py's
test_environments_throttled_together_retry_apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anthropic
import pytest
from policy_gateway import names, settings
from policy_gateway.aws_reads import TOTAL_ATTEMPTS
from policy_gateway.parameters import RETRY_MAX_SECONDS

from .support.aws import AWSProxy, wait_until
from .support.client import policy_chain
from .support.clock import ManualClock
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import ask, sdk

PARAMETER = settings.DEFAULT_POLICY_CONFIG_PARAMETER
GET_PARAMETERS = "AmazonSSM.GetParameters"
TTL = 30.0
# botocore's longest back-off before a throttled read's second attempt, and a margin.
SECOND_ATTEMPT_WITHIN = 1.2
# Real time for a refresh a call started in the background to reach the proxy.
STARTING = 0.05


def rewrite_to(model: str) -> str:
    return policy_chain(("rewrite_model", {"map": {MODEL: model}}))


def settled(proxy: AWSProxy) -> None:
    """Wait until the refresh a call may have started has ended: every read answered,
    the last one either served or throttled long enough ago that no retry follows."""
    time.sleep(STARTING)

    def ended() -> bool:
        calls = list(proxy.calls)
        if not calls or not all(call.answered for call in calls):
            return not calls
        last = calls[-1]
        return not last.throttled or time.monotonic() - (last.answered or 0) > (
            SECOND_ATTEMPT_WITHIN
        )

    wait_until(ended)


def test_throttled_ssm_keeps_calls_served_with_the_flag_off_and_the_chain_last_good(
    aws_proxy: tuple[AWSProxy, str],
    monkeypatch: pytest.MonkeyPatch,
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    ssm: Any,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    clock: ManualClock,
) -> None:
    proxy, aws_url = aws_proxy
    monkeypatch.setenv("AWS_ENDPOINT_URL_SSM", aws_url)
    set_flag("true")
    ssm.put_parameter(Name=PARAMETER, Value=rewrite_to("claude-a"), Type="String")
    client = sdk(
        make_gateway(
            policy_config_parameter=PARAMETER, policy_config_ttl=TTL, flag_ttl=TTL, clock=clock
        )
    )
    # Healthy: the flag and the chain in one call; a rejected rewrite falls back.
    upstream.script(Reply.error(400, "invalid_request_error"))
    ask(client, False)
    assert [r.json["model"] for r in upstream.requests] == ["claude-a", MODEL]
    assert proxy.operations == [GET_PARAMETERS]

    # Every call throttled; the operator changes the chain meanwhile.
    proxy.throttle(1.0)
    ssm.put_parameter(Name=PARAMETER, Value=rewrite_to("claude-b"), Overwrite=True, Type="String")
    clock.advance(TTL)
    ask(client, False)  # starts the refresh, which botocore retries once, then gives up
    gateway_stdout.until(lambda text: "fallback flag unreadable" in text)
    assert proxy.operations[1:] == [GET_PARAMETERS] * TOTAL_ATTEMPTS
    assert all(call.throttled for call in proxy.calls[1:])
    upstream.script(Reply.error(400, "invalid_request_error"))
    with pytest.raises(anthropic.BadRequestError):
        ask(client, True)  # the flag failed closed: no fallback
    # Every call was served, by the last good chain.
    assert [r.json["model"] for r in upstream.requests][2:] == ["claude-a"] * 2
    messages = [line.get("message") for line in gateway_stdout.lines()]
    assert "fallback flag unreadable; treating it as off" in messages
    assert "policy config unusable; keeping the last good chain" in messages

    # A throttled share of one call in two: the change arrives, a few back-offs late.
    proxy.throttle(0.5)
    since_change = TTL
    while upstream.requests[-1].json["model"] != "claude-b":
        assert since_change < TTL + 3 * RETRY_MAX_SECONDS, "the change never arrived"
        clock.advance(1.0)
        since_change += 1.0
        ask(client, False)
        settled(proxy)
    assert any(
        line.get("message") == names.LOG_POLICY_CHAIN_LOADED
        and line["chain_version"].startswith("v2:")
        for line in gateway_stdout.lines()
    )
