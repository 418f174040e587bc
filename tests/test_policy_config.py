"""Live policy config from SSM (moto), fallback attribution in the log, redaction vs fallback."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import pytest
from policy_gateway import names, settings

from .support.client import policy_chain
from .support.clock import ManualClock
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import ask, both, sdk

PARAMETER = settings.DEFAULT_POLICY_CONFIG_PARAMETER
TTL = 0.5
SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def put_config(ssm: Any) -> Callable[[str], None]:
    def put(value: str) -> None:
        ssm.put_parameter(Name=PARAMETER, Value=value, Type="String", Overwrite=True)

    return put


def rewrite_to(model: str) -> str:
    return policy_chain(("rewrite_model", {"map": {MODEL: model}}))


def sent_model(upstream: FakeUpstream) -> str:
    return str(upstream.requests[-1].json["model"])


def config_errors(stdout: GatewayStdout) -> int:
    """PolicyConfigErrors counted in EMF, once the gateway has flushed them."""

    def count() -> int:
        return sum(
            len(line.get(names.METRIC_POLICY_CONFIG_ERRORS, []))
            for line in stdout.lines()
            if "_aws" in line
        )

    stdout.until(lambda _: count() >= 1)
    return count()


def live_gateway(make_gateway: GatewayFactory, clock: ManualClock | None = None) -> str:
    extra = {} if clock is None else {"clock": clock}
    return make_gateway(policy_config_parameter=PARAMETER, policy_config_ttl=TTL, **extra)


def test_a_changed_parameter_applies_within_the_ttl(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    put_config: Callable[[str], None],
    clock: ManualClock,
) -> None:
    put_config(rewrite_to("claude-a"))
    client = sdk(live_gateway(make_gateway, clock))
    ask(client, False)
    assert sent_model(upstream) == "claude-a"
    put_config(rewrite_to("claude-b"))
    clock.advance(TTL + 0.1)
    ask(client, True)
    assert sent_model(upstream) == "claude-b"


@pytest.mark.parametrize(
    "broken",
    [
        "{not json",
        json.dumps({"policies": [{"policy": "no_such_policy"}]}),
        policy_chain(("cap_max_tokens", {"max": -1})),
        json.dumps(
            {"policies": [], "callers": {"bob": {"policies": [{"policy": "no_such_policy"}]}}}
        ),
    ],
    ids=["json", "unknown-policy", "bad-options", "bad-caller-chain"],
)
def test_a_broken_config_keeps_the_last_good_chain_and_is_counted(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    put_config: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    broken: str,
    clock: ManualClock,
) -> None:
    put_config(rewrite_to("claude-good"))
    client = sdk(live_gateway(make_gateway, clock))
    ask(client, False)
    put_config(broken)
    clock.advance(TTL + 0.1)
    ask(client, False)
    ask(client, True)
    assert [r.json["model"] for r in upstream.requests] == ["claude-good"] * 3
    assert config_errors(gateway_stdout) >= 1
    assert any(
        line.get("message") == "policy config unusable; keeping the last good chain"
        for line in gateway_stdout.lines()
    )
    put_config(rewrite_to("claude-fixed"))
    clock.advance(TTL + 0.1)
    ask(client, False)
    assert sent_model(upstream) == "claude-fixed"


@both
@pytest.mark.parametrize("config", ["{not json", None], ids=["broken", "missing"])
def test_without_any_good_chain_requests_fail_closed(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    put_config: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    streaming: bool,
    config: str | None,
) -> None:
    if config is not None:
        put_config(config)
    with pytest.raises(anthropic.InternalServerError) as caught:
        ask(sdk(live_gateway(make_gateway)), streaming)
    assert caught.value.status_code == 500
    body: Any = caught.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "no valid policy configuration" in body["error"]["message"]
    assert upstream.requests == []
    assert config_errors(gateway_stdout) >= 1


# ------------------------------------- a change in force when promised (issue 34)


def loaded_versions(stdout: GatewayStdout) -> list[str]:
    return [
        line["chain_version"]
        for line in stdout.lines()
        if line.get("message") == names.LOG_POLICY_CHAIN_LOADED
    ]


def test_serve_loads_a_change_within_the_ttl_without_any_call(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    put_config: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    clock: ManualClock,
) -> None:
    put_config(rewrite_to("claude-a"))
    make_gateway(
        policy_config_parameter=PARAMETER,
        policy_config_ttl=TTL,
        refresh_in_background=True,
        clock=clock,
    )
    gateway_stdout.until(lambda _: len(loaded_versions(gateway_stdout)) == 1)
    put_config(rewrite_to("claude-b"))
    clock.advance(TTL)
    gateway_stdout.until(lambda _: len(loaded_versions(gateway_stdout)) == 2)
    first, second = loaded_versions(gateway_stdout)
    assert (first.split(":")[0], second.split(":")[0]) == ("v1", "v2")
    assert upstream.requests == []


def test_the_load_line_names_every_chains_shadow_policies(
    make_gateway: GatewayFactory, put_config: Callable[[str], None], gateway_stdout: GatewayStdout
) -> None:
    shadow = {"policy": "cap_max_tokens", "options": {"max": 10}, "mode": "shadow"}
    put_config(
        json.dumps(
            {
                "policies": [{"policy": "redact_secrets"}, shadow],
                "callers": {
                    "bob": {"policies": [shadow]},
                    "group:ops": {"policies": [{"policy": "redact_secrets"}]},
                    "carol": {"policies": [{"policy": "redact_secrets"}, shadow]},
                },
            }
        )
    )
    sdk(live_gateway(make_gateway))
    gateway_stdout.until(lambda _: bool(loaded_versions(gateway_stdout)))
    [line] = [
        line
        for line in gateway_stdout.lines()
        if line.get("message") == names.LOG_POLICY_CHAIN_LOADED
    ]
    assert line["shadow"] == ["cap_max_tokens"]
    assert line["callers"] == ["bob", "carol", "group:ops"]
    assert line["caller_shadow"] == {"bob": ["cap_max_tokens"], "carol": ["cap_max_tokens"]}


def test_each_call_records_the_age_of_the_chain_version_in_force(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    put_config: Callable[[str], None],
    gateway_stdout: GatewayStdout,
) -> None:
    put_config(rewrite_to("claude-a"))
    client = sdk(live_gateway(make_gateway))
    ask(client, False)
    ask(client, True)

    def ages() -> list[float]:
        found: list[float] = []
        for line in gateway_stdout.lines():
            if names.METRIC_CHAIN_VERSION_AGE in line:
                (declared,) = line["_aws"]["CloudWatchMetrics"]
                assert declared["Dimensions"] == [[names.METRICS_SERVICE_DIMENSION]]
                units = {m["Name"]: m.get("Unit") for m in declared["Metrics"]}
                assert units[names.METRIC_CHAIN_VERSION_AGE] == "Seconds"
                found.extend(line[names.METRIC_CHAIN_VERSION_AGE])
        return found

    gateway_stdout.until(lambda _: len(ages()) == 2)
    # Written by put_config just now (moto dates it to the second).
    assert all(0 <= age < 60 for age in ages()), ages()


# ------------------------------------------------------------- the fallback


def test_fallback_log_names_the_policies_and_paths_never_the_text(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
) -> None:
    set_flag("true")
    config = policy_chain(
        ("rewrite_model", {"map": {MODEL: "claude-renamed"}}),
        ("string_replace", {"replacements": [["project-nightjar", "[codename]"]]}),
        ("cap_max_tokens", {"max": 1000}),
    )
    url = make_gateway(policy_config=config)
    upstream.script(Reply.error(404, "not_found_error", "model: claude-renamed"))
    text = "tell me about project-nightjar"
    ask(sdk(url), False, messages=[{"role": "user", "content": [{"type": "text", "text": text}]}])
    assert len(upstream.requests) == 2
    out = gateway_stdout.until(lambda text: "call finished" in text)
    [warning] = [line for line in gateway_stdout.lines() if line.get("level") == "WARNING"]
    assert warning["message"].startswith("passthrough fallback")
    assert warning["changed_by_policy"] == {
        "rewrite_model": ["$.model"],
        "string_replace": ["$.messages[0].content[0].text"],
    }
    assert warning["changed_paths"] == ["$.messages[0].content[0].text", "$.model"]
    for content in ("project-nightjar", "[codename]", "tell me about"):
        assert content not in out


@both
def test_redaction_never_leaks_through_the_fallback(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    set_flag: Callable[[str], None],
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    set_flag("true")
    config = policy_chain(("redact_secrets", {}), ("rewrite_model", {"map": {MODEL: "claude-x"}}))
    url = make_gateway(policy_config=config)
    upstream.script(Reply.error(400, "invalid_request_error", "rejected"))
    # The fallback is narrow: the client's model, the redaction re-applied.
    ask(sdk(url), streaming, messages=[{"role": "user", "content": f"key {SECRET}"}])
    assert [r.json["model"] for r in upstream.requests] == ["claude-x", MODEL]
    assert all(SECRET.encode() not in r.body for r in upstream.requests)
    for sent in upstream.requests:
        assert sent.json["messages"][0]["content"] == "key [REDACTED:aws_access_key_id]"
    assert SECRET not in gateway_stdout.until(lambda text: "call finished" in text)
