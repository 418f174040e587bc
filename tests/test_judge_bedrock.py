"""A judge on Amazon Bedrock: InvokeModel, signed with SigV4 for `bedrock` with the role's
credentials, against a loopback stand-in for AWS_ENDPOINT_URL_BEDROCK_RUNTIME."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from typing import Any
from urllib.parse import quote

import pytest
from gateway_policies import Policy, PolicyContext
from gateway_policies.judge.bedrock import ANTHROPIC_VERSION, ENV_ENDPOINT_URL, BedrockProvider
from gateway_policies.judge.core import Judge, Outcome
from gateway_policies.judge.options import JudgeOptions
from gateway_policies.judge.prompt import Judged

from .conftest import AWS_TEST_ENV, BEDROCK_REGION
from .support.fake_bedrock import BedrockReply, FakeBedrock, Received
from .support.servers import ThreadedServer

MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
RULES = "Never delete the user's home directory."


class Judging(Policy):
    name = "judging"


def _answer(decision: str) -> dict[str, Any]:
    call = {"decision": decision, "reason": "scripted", "rule": "home"}
    return {
        "id": "msg_bedrock",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "tool_use", "id": "toolu_v", "name": "verdict", "input": call}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 321, "output_tokens": 12},
    }


@pytest.fixture
def on_bedrock(
    _bedrock_server: tuple[FakeBedrock, ThreadedServer],
    bedrock: FakeBedrock,
    monkeypatch: pytest.MonkeyPatch,
) -> FakeBedrock:
    monkeypatch.setenv(ENV_ENDPOINT_URL, _bedrock_server[1].url)
    monkeypatch.setenv("AWS_REGION", BEDROCK_REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", BEDROCK_REGION)
    return bedrock


def _decide(options: dict[str, Any], judged: Judged) -> tuple[Outcome, PolicyContext]:
    judge = Judge(Judging(), JudgeOptions.model_validate(options), RULES)
    ctx = PolicyContext(endpoint="messages", stream=False, call_id="bedrock-judge")

    async def decide() -> Outcome:
        try:
            return await judge.decide(judged, ctx)
        finally:
            provider = judge.provider
            assert isinstance(provider, BedrockProvider)
            await provider.aclose()

    return asyncio.run(decide()), ctx


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _signature(received: Received, signed: list[str]) -> str:
    """SigV4 written out from the AWS spec, independent of botocore: the canonical request
    (its path encoded once more, as every service but S3 wants it; the body's SHA-256),
    the string to sign, the derived key."""
    date = received.headers["x-amz-date"]
    canonical = "\n".join(
        [
            "POST",
            quote(received.path, safe="/-_.~"),
            "",
            *(f"{name}:{received.headers[name].strip()}" for name in signed),
            "",
            ";".join(signed),
            _sha256(received.body),
        ]
    )
    scope = f"{date[:8]}/{BEDROCK_REGION}/bedrock/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{date}\n{scope}\n{_sha256(canonical.encode())}"
    key = f"AWS4{AWS_TEST_ENV['AWS_SECRET_ACCESS_KEY']}".encode()
    for part in (date[:8], BEDROCK_REGION, "bedrock", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


@pytest.mark.parametrize("decision", ["block", "allow"])
def test_a_bedrock_judge_signs_invoke_model_and_its_verdict_decides(
    on_bedrock: FakeBedrock, decision: str
) -> None:
    on_bedrock.script(BedrockReply(body=_answer(decision)))
    judged = Judged.tool_call("Bash", {"command": "rm -rf ~"})
    outcome, ctx = _decide({"provider": "bedrock", "model": MODEL}, judged)
    assert outcome.error is None
    assert outcome.decision == decision
    (sent,) = on_bedrock.requests
    # InvokeModel on the configured model, in its Bedrock form.
    assert sent.path == f"/model/{quote(MODEL, safe='')}/invoke"
    assert sent.model_id == MODEL
    # SigV4 for the service `bedrock` in the function's region, with the role's
    # credentials (their session token too), as botocore and the spec both compute it.
    assert sent.signature_valid
    assert (sent.service, sent.region) == ("bedrock", BEDROCK_REGION)
    authorization = sent.headers["authorization"]
    credential = authorization.split("Credential=")[1].split(",")[0]
    assert credential.startswith(f"{AWS_TEST_ENV['AWS_ACCESS_KEY_ID']}/")
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert signed == ["accept", "content-type", "host", "x-amz-date", "x-amz-security-token"]
    assert sent.headers["x-amz-security-token"] == AWS_TEST_ENV["AWS_SESSION_TOKEN"]
    assert authorization.endswith(f"Signature={_signature(sent, signed)}")
    # The Anthropic Messages body as Bedrock takes it, the verdict tool forced.
    body = sent.json
    assert body["anthropic_version"] == ANTHROPIC_VERSION
    assert "model" not in body
    assert "stream" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
    assert [tool["name"] for tool in body["tools"]] == ["verdict"]
    assert body["system"].startswith(RULES) or RULES in body["system"]
    assert "rm -rf ~" in body["messages"][0]["content"]
    assert RULES not in body["messages"][0]["content"]
    # What it cost is recorded as for any judge.
    (call,) = ctx.judge_calls
    assert (call.provider, call.model) == ("bedrock", MODEL)
    assert (call.input_tokens, call.output_tokens) == (321, 12)
    assert call.error is None


def test_a_body_changed_after_signing_fails_the_signature_check(on_bedrock: FakeBedrock) -> None:
    on_bedrock.script(BedrockReply(body=_answer("allow")))
    _decide({"provider": "bedrock", "model": MODEL}, Judged.tool_call("Bash", {"command": "ls"}))
    (sent,) = on_bedrock.requests
    signed = sent.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    tampered = Received(sent.path, sent.headers, sent.body + b" ", sent.region, sent.service, True)
    # The signature covers the body's hash: one byte more and it no longer matches.
    assert sent.headers["authorization"].endswith(_signature(sent, signed))
    assert not sent.headers["authorization"].endswith(_signature(tampered, signed))


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (BedrockReply.exception("ThrottlingException", 429), "status"),
        (BedrockReply.exception("AccessDeniedException", 403), "status"),
        (BedrockReply(body={"content": [{"type": "text", "text": "allow"}]}), "no_verdict"),
    ],
)
def test_a_bedrock_failure_is_a_judge_error_that_blocks_by_default(
    on_bedrock: FakeBedrock, reply: BedrockReply, kind: str
) -> None:
    on_bedrock.script(reply)
    outcome, ctx = _decide(
        {"provider": "bedrock", "model": MODEL}, Judged.tool_call("Bash", {"command": "ls"})
    )
    assert outcome.error is not None
    assert outcome.error.kind == kind
    assert outcome.decision == "block"
    assert [call.error for call in ctx.judge_calls] == [kind]
    # The error's text names the exception, never the answer's message.
    assert "scripted" not in str(outcome.error)


def test_a_model_that_is_no_bedrock_id_is_never_signed_or_sent(on_bedrock: FakeBedrock) -> None:
    for model in ("claude-haiku-4-5", "anthropic.x/../../other"):
        outcome, _ = _decide(
            {"provider": "bedrock", "model": model}, Judged.tool_call("Bash", {"command": "ls"})
        )
        assert outcome.error is not None
        assert outcome.error.kind == "unavailable"
    assert on_bedrock.requests == []


def test_no_credentials_is_a_judge_error(
    on_bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    outcome, _ = _decide(
        {"provider": "bedrock", "model": MODEL}, Judged.tool_call("Bash", {"command": "ls"})
    )
    assert outcome.error is not None
    assert outcome.error.kind == "unavailable"
    assert on_bedrock.requests == []
    assert json.dumps(outcome.reason())
