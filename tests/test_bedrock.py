"""Amazon Bedrock as the upstream, end to end: SDK → gateway → a fake bedrock-runtime.

The fake (tests/support/fake_bedrock.py) is a real HTTP server that refuses any
request whose SigV4 signature botocore does not reproduce for the service
`bedrock` in the configured region, and streams real event-stream frames
split at awkward byte boundaries. The client is the official SDK, as for the
Anthropic upstream: the same clients, policies and fallback must work.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import quote
from zlib import crc32

import anthropic
import httpx2
import pytest
from gateway_policies.testing import as_pairs, stream, text_block, tool_use_block
from policy_gateway import settings, surface
from policy_gateway.app import create_app
from policy_gateway.upstream.client import provider_for

from .support.client import HEADERS, error_of, policy_chain, request_body, sse_frames
from .support.fake_bedrock import (
    BedrockReply,
    FakeBedrock,
    corrupt,
    exception_message,
    frames,
)
from .support.fake_upstream import MODEL, FakeUpstream, message, text_events
from .support.gateway import GatewayStdout
from .support.routes import requests_for
from .support.sdk import ask, sdk
from .support.servers import ThreadedServer

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
MODEL_MAP = json.dumps({MODEL: BEDROCK_MODEL})
TOOLS: list[Any] = [
    {"name": n, "description": n, "input_schema": {"type": "object"}} for n in ("bash", "read")
]
BASH_RM = {"tool": "^bash$", "input": "rm -rf"}
REPLACE = policy_chain(("string_replace", {"replacements": [["secret-project", "[codename]"]]}))
USER = "tell me about secret-project"
COUNT = "/v1/messages/count_tokens"

Factory = Callable[..., str]


@pytest.fixture
def bedrock_gateway(
    bedrock_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Factory]:
    """A gateway configured from the environment (as in Lambda) to call the fake Bedrock."""
    servers: list[ThreadedServer] = []

    def start(env: dict[str, str] | None = None, **overrides: Any) -> str:
        for key, value in {**bedrock_env, settings.ENV_BEDROCK_MODEL_MAP: MODEL_MAP}.items():
            monkeypatch.setenv(key, value)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        config = replace(
            settings.Settings.from_env(),
            **{"upstream_max_retries": 0, "flag_ttl": 0.2, **overrides},
        )
        server = ThreadedServer(create_app(config)).start()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


def tool_reply(streaming: bool, *calls: tuple[str, dict[str, Any]], text: str = "") -> BedrockReply:
    if streaming:
        blocks = [text_block(0, text)] if text else []
        first = len(blocks)
        blocks += [tool_use_block(first + i, name, args) for i, (name, args) in enumerate(calls)]
        return BedrockReply(stream=frames(as_pairs(stream(*blocks, stop_reason="tool_use"))))
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(calls)
    ]
    return BedrockReply(body=message("", content=content) | {"stop_reason": "tool_use"})


def raw(url: str, body: dict[str, Any], path: str = "/v1/messages") -> httpx2.Response:
    return httpx2.post(f"{url}{path}", json=body, headers=HEADERS, timeout=10)


both = pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])


# ------------------------------------------------------------------- requests


@both
def test_text_through_bedrock_is_signed_and_shaped_for_bedrock(
    bedrock_gateway: Factory, bedrock: FakeBedrock, streaming: bool
) -> None:
    url = bedrock_gateway()
    client = sdk(url, default_headers={"anthropic-beta": "beta-one, beta-two"})
    reply = ask(client, streaming, system="be brief", metadata={"user_id": "u-1"})
    assert [block.type for block in reply.content] == ["text"]
    assert reply.content[0].text.replace(" ", "") == "echo:hello"  # type: ignore[union-attr]
    (sent,) = bedrock.requests
    assert sent.signature_valid
    assert (sent.region, sent.service) == ("us-west-2", "bedrock")
    assert sent.model_id == BEDROCK_MODEL
    assert sent.operation == ("invoke-with-response-stream" if streaming else "invoke")
    assert sent.json == {
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hello"}],
        "system": "be brief",
        "metadata": {"user_id": "u-1"},
        "anthropic_version": "bedrock-2023-05-31",
        "anthropic_beta": ["beta-one", "beta-two"],
    }
    # The client's key goes nowhere near AWS: only the gateway's own headers do.
    assert "x-api-key" not in sent.headers
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert "sk-ant-test-key" not in json.dumps(sent.headers)
    assert "anthropic-beta" not in sent.headers


def test_stream_reaches_the_client_as_the_messages_api_sse(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway()
    events = text_events(["one", " two", " three"])
    bedrock.script(BedrockReply(stream=frames(events)))
    response = raw(url, request_body(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"].startswith("fake-bedrock-")
    got = sse_frames(response.text)
    assert [name for name, _ in got] == [name for name, _ in events]
    assert [json.loads(data) for _, data in got] == [data for _, data in events]


@both
def test_tool_use_through_bedrock(
    bedrock_gateway: Factory, bedrock: FakeBedrock, streaming: bool
) -> None:
    url = bedrock_gateway()
    bedrock.script(tool_reply(streaming, ("read", {"path": "a.txt", "lines": [1, 2]}), text="Ok."))
    reply = ask(sdk(url), streaming, tools=TOOLS)
    assert [block.type for block in reply.content] == ["text", "tool_use"]
    assert reply.content[1].input == {"path": "a.txt", "lines": [1, 2]}  # type: ignore[union-attr]
    assert reply.stop_reason == "tool_use"
    assert bedrock.requests[0].json["tools"] == TOOLS


def test_block_tool_calls_blocks_a_streamed_tool_call_from_bedrock(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": [BASH_RM]})))
    bedrock.script(tool_reply(True, ("bash", {"command": "rm -rf /"}), text="Cleaning."))
    reply = ask(sdk(url), True, tools=TOOLS)
    assert [block.type for block in reply.content] == ["text", "text"]
    assert "blocked a call to tool 'bash'" in reply.content[1].text  # type: ignore[union-attr]
    assert reply.stop_reason == "end_turn"


def test_count_tokens_uses_bedrocks_count_tokens(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway()
    bedrock.script(BedrockReply(body={"inputTokens": 42}))
    count = sdk(url).messages.count_tokens(
        model=MODEL,
        messages=[{"role": "user", "content": "hello"}],
        thinking={"type": "enabled", "budget_tokens": 2048},
    )
    assert count.input_tokens == 42
    (sent,) = bedrock.requests
    assert sent.signature_valid
    assert sent.operation == "count-tokens"
    # CountTokens takes the foundation model an inference profile routes to.
    assert sent.model_id == "anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert sent.invoke_body == {
        "messages": [{"role": "user", "content": "hello"}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 2049,
    }


def test_bedrock_model_ids_pass_as_is_and_unknown_names_are_refused(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway()
    arn = "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/abc123"
    assert raw(url, request_body() | {"model": arn}).status_code == 200
    assert bedrock.requests[0].model_id == arn
    assert bedrock.requests[0].path.split("/")[2] == arn.replace(":", "%3A").replace("/", "%2F")
    refused = raw(url, request_body() | {"model": "claude-unmapped-1"})
    assert refused.status_code == 404
    assert error_of(refused.content)["type"] == "not_found_error"
    assert settings.ENV_BEDROCK_MODEL_MAP in error_of(refused.content)["message"]
    assert len(bedrock.requests) == 1


BEDROCK_FORMS = [
    "anthropic.claude-3-5-haiku-20241022-v1:0",
    "anthropic.claude-3-sonnet-20240229-v1:0:28k",
    "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0",
    "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-v1:0",
    "arn:aws-us-gov:bedrock:us-gov-west-1:123456789012:provisioned-model/a1b2c3d4e5f6",
    "arn:aws:bedrock:us-west-2:123456789012:custom-model/anthropic.claude-v2:1:100k/a1b2c3d4e5f6",
]
# Dot segments (an HTTP client resolves them: `/model/../invoke` is sent as
# `/invoke`), empty parts, slashes outside an ARN's resource, other characters.
NOT_BEDROCK = [
    "..",
    ".",
    "...",
    "./anthropic.claude-v2",
    "anthropic.claude-v2/..",
    "anthropic..claude-v2",
    "anthropic.claude-v2.",
    ".anthropic.claude-v2",
    "anthropic.claude-v2/../../x",
    "us.anthropic.claude-v2:",
    "arn:aws:bedrock:us-west-2:123456789012:inference-profile/..",
    "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.x/../..",
    "arn:aws:bedrock:us-west-2:123456789012:inference-profile/",
    "arn:aws:s3:::bucket/anthropic.claude-v2",
    "anthropic.claude v2",
    "anthropic.claude-v2?x=1",
    "anthropic.claude-v2%2F..",
    pytest.param("a" * 2049 + ".b", id="longer-than-bedrock-allows"),
]


@pytest.mark.parametrize("model", BEDROCK_FORMS)
def test_every_bedrock_identifier_form_is_sent_as_one_path_segment(
    bedrock_gateway: Factory, bedrock: FakeBedrock, model: str
) -> None:
    url = bedrock_gateway()
    assert raw(url, request_body() | {"model": model}).status_code == 200
    (sent,) = bedrock.requests
    assert sent.model_id == model
    assert sent.path == f"/model/{quote(model, safe='')}/invoke"


@pytest.mark.parametrize("model", NOT_BEDROCK)
def test_a_model_that_is_no_bedrock_identifier_is_refused_before_anything_is_signed(
    bedrock_gateway: Factory, bedrock: FakeBedrock, model: str
) -> None:
    url = bedrock_gateway()
    for route, streaming in (("/v1/messages", False), ("/v1/messages", True), (COUNT, False)):
        refused = raw(url, request_body(stream=streaming) | {"model": model}, route)
        assert refused.status_code == 400, (route, streaming)
        error = error_of(refused.content)
        assert error["type"] == "invalid_request_error"
        assert "Bedrock model ID" in error["message"]
    assert bedrock.requests == []


def test_a_model_map_naming_no_bedrock_identifier_fails_the_start() -> None:
    for target in ("..", ".", "anthropic.claude-v2/.."):
        config = settings.Settings(
            upstream_provider="bedrock",
            bedrock_region="us-west-2",
            bedrock_model_map=json.dumps({MODEL: target}),
        )
        with pytest.raises(ValueError, match=settings.ENV_BEDROCK_MODEL_MAP):
            provider_for(config)


def test_gateway_key_mode_needs_no_anthropic_key_and_never_forwards_the_gateway_key(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    import boto3

    secrets = boto3.client("secretsmanager")
    secrets.create_secret(
        Name="bedrock-gw-keys", SecretString='{"keys": ["gw-key-0123456789abcdef"]}'
    )
    url = bedrock_gateway(
        auth_mode=settings.AUTH_GATEWAY_KEY,
        gateway_keys_secret="bedrock-gw-keys",
        upstream_api_key_secret="never-created",
    )
    client = anthropic.Anthropic(base_url=url, api_key="gw-key-0123456789abcdef", max_retries=0)
    assert ask(client, False).content[0].text == "echo: hello"  # type: ignore[union-attr]
    assert "gw-key-0123456789abcdef" not in json.dumps(bedrock.requests[0].headers)
    with pytest.raises(anthropic.AuthenticationError):
        ask(anthropic.Anthropic(base_url=url, api_key="wrong", max_retries=0), False)
    assert len(bedrock.requests) == 1


ANTHROPIC_ONLY = requests_for(
    route for route in surface.ROUTES if not surface.offered_by_bedrock(route)
)


def test_anthropic_only_routes_answer_404_and_forward_nothing(
    bedrock_gateway: Factory, bedrock: FakeBedrock, upstream: FakeUpstream, upstream_url: str
) -> None:
    # Even with the Files API allowed and an Anthropic base URL configured:
    # Bedrock has neither API, and the client's key must go nowhere.
    url = bedrock_gateway(upstream_base_url=upstream_url, allow_files_api=True)
    batch = {"requests": [{"custom_id": "a", "params": request_body()}]}
    for method, path in ANTHROPIC_ONLY:
        reply = httpx2.request(
            method,
            f"{url}{path}",
            json=batch if method == "POST" else None,
            headers=HEADERS,
            timeout=10,
        )
        assert reply.status_code == 404, (method, path)
        error = error_of(reply.content)
        assert error["type"] == "not_found_error"
        assert "not available with the Bedrock provider" in error["message"]
        assert path in error["message"]
    assert bedrock.requests == []
    assert upstream.requests == []
    with pytest.raises(anthropic.NotFoundError):
        sdk(url).models.list()
    # The Messages API itself is served on the same gateway.
    assert ask(sdk(url), False).content[0].text == "echo: hello"  # type: ignore[union-attr]


# --------------------------------------------------------------------- errors

MAPPINGS = [
    ("ValidationException", 400, 400, "invalid_request_error"),
    ("AccessDeniedException", 403, 403, "permission_error"),
    ("ResourceNotFoundException", 404, 404, "not_found_error"),
    ("ThrottlingException", 429, 429, "rate_limit_error"),
    ("ServiceQuotaExceededException", 400, 429, "rate_limit_error"),
    ("InternalServerException", 500, 500, "api_error"),
    ("ModelErrorException", 424, 500, "api_error"),
    ("ServiceUnavailableException", 503, 503, "api_error"),
    ("ModelNotReadyException", 429, 529, "overloaded_error"),
    ("ModelTimeoutException", 408, 504, "timeout_error"),
]


@both
def test_a_bedrock_redirect_is_a_502_and_its_location_is_not_relayed(
    bedrock_gateway: Factory, bedrock: FakeBedrock, streaming: bool
) -> None:
    url = bedrock_gateway(upstream_max_retries=2)
    bedrock.script(BedrockReply(status=307, headers={"location": "http://127.0.0.1:9/x"}))
    response = raw(url, request_body(stream=streaming))
    assert response.status_code == 502
    assert error_of(response.content)["type"] == "api_error"
    assert "location" not in response.headers
    assert len(bedrock.requests) == 1


@both
@pytest.mark.parametrize(("name", "bedrock_status", "status", "kind"), MAPPINGS)
def test_bedrock_exceptions_reach_the_sdk_as_messages_api_errors(
    bedrock_gateway: Factory,
    bedrock: FakeBedrock,
    name: str,
    bedrock_status: int,
    status: int,
    kind: str,
    streaming: bool,
) -> None:
    url = bedrock_gateway()
    bedrock.script(BedrockReply.exception(name, bedrock_status, f"{name} says no"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        ask(sdk(url), streaming)
    assert caught.value.status_code == status
    body: Any = caught.value.body
    assert body["type"] == "error"
    assert body["error"] == {"type": kind, "message": f"{name} says no"}
    assert body["request_id"].startswith("fake-bedrock-")
    assert caught.value.request_id == body["request_id"]
    assert len(bedrock.requests) == 1


def test_retries_follow_the_mapped_status(bedrock_gateway: Factory, bedrock: FakeBedrock) -> None:
    url = bedrock_gateway(upstream_max_retries=2)
    # ModelNotReady (HTTP 429 from Bedrock, 529 to the client) and throttling are retried...
    bedrock.script(
        BedrockReply.exception("ModelNotReadyException", 429),
        BedrockReply.exception("ThrottlingException", 429),
    )
    assert ask(sdk(url), False).content[0].text == "echo: hello"  # type: ignore[union-attr]
    assert len(bedrock.requests) == 3
    assert all(request.signature_valid for request in bedrock.requests)
    # ...a ValidationException never is.
    bedrock.reset()
    bedrock.script(BedrockReply.exception("ValidationException", 400))
    with pytest.raises(anthropic.BadRequestError):
        ask(sdk(url), False)
    assert len(bedrock.requests) == 1


@pytest.mark.parametrize(
    ("exception", "kind"),
    [
        ("modelStreamErrorException", "api_error"),
        ("throttlingException", "rate_limit_error"),
        ("internalServerException", "api_error"),
    ],
)
def test_mid_stream_exception_becomes_one_error_event(
    bedrock_gateway: Factory, bedrock: FakeBedrock, exception: str, kind: str
) -> None:
    url = bedrock_gateway()
    events = text_events(["a", "b", "c"])
    bedrock.script(
        BedrockReply(stream=[*frames(events[:4]), exception_message(exception, "it broke")])
    )
    response = raw(url, request_body(stream=True))
    assert response.status_code == 200
    got = sse_frames(response.text)
    assert [name for name, _ in got] == [name for name, _ in events[:4]] + ["error"]
    assert error_of(got[-1][1]) == {"type": kind, "message": "it broke"}


def test_corrupt_frame_mid_stream_becomes_one_error_event(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway()
    events = text_events(["a", "b", "c"])
    stream_frames = frames(events)
    stream_frames[4] = corrupt(stream_frames[4])
    bedrock.script(BedrockReply(stream=stream_frames))
    response = raw(url, request_body(stream=True))
    assert response.status_code == 200
    got = sse_frames(response.text)
    assert [name for name, _ in got] == [name for name, _ in events[:4]] + ["error"]
    assert error_of(got[-1][1])["type"] == "api_error"


@pytest.mark.parametrize("kept", [0, 4, 8], ids=lambda n: f"after-{n}")
def test_a_stream_ended_before_message_stop_is_an_error_never_a_clean_end(
    bedrock_gateway: Factory, bedrock: FakeBedrock, kept: int
) -> None:
    url = bedrock_gateway()
    events = text_events(["a", "b", "c"])
    bedrock.script(BedrockReply(stream=frames(events[:kept])))
    with pytest.raises(anthropic.APIStatusError) as caught:
        ask(sdk(url), True)
    error = caught.value
    assert error.status_code == (502 if kept == 0 else 200)
    assert error.body["error"]["type"] == "api_error"  # type: ignore[index]


def test_corrupt_first_frame_is_an_error_response_not_a_stream(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway()
    stream_frames = frames(text_events(["a"]))
    stream_frames[0] = corrupt(stream_frames[0])
    bedrock.script(BedrockReply(stream=stream_frames))
    response = raw(url, request_body(stream=True))
    assert response.status_code == 502
    assert error_of(response.content)["type"] == "api_error"


def test_a_frame_announcing_more_than_the_limit_is_a_corrupt_frame_at_once(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    # A valid prelude announcing a 1 GB message, and nothing after it: the
    # gateway answers on the prelude, without waiting for (or holding) the rest.
    head = struct.pack(">II", 1 << 30, 0)
    prelude = head + struct.pack(">I", crc32(head))
    url = bedrock_gateway()
    bedrock.script(BedrockReply(stream=[prelude]))
    response = raw(url, request_body(stream=True))
    assert response.status_code == 502
    assert error_of(response.content)["type"] == "api_error"


def test_stream_cut_inside_a_frame_ends_with_an_error_event(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway()
    events = text_events(["a", "b"])
    stream_frames = frames(events)
    stream_frames[-1] = stream_frames[-1][:10]
    bedrock.script(BedrockReply(stream=stream_frames))
    got = sse_frames(raw(url, request_body(stream=True)).text)
    assert [name for name, _ in got] == [name for name, _ in events[:-1]] + ["error"]


# ------------------------------------------------------------------- fallback


@both
def test_policy_caused_validation_exception_falls_back_to_the_original(
    bedrock_gateway: Factory,
    bedrock: FakeBedrock,
    set_flag: Callable[[str], None],
    streaming: bool,
) -> None:
    set_flag("true")
    url = bedrock_gateway(policy_config=REPLACE)
    bedrock.script(BedrockReply.exception("ValidationException", 400, "bad codename"))
    reply = ask(sdk(url), streaming, messages=[{"role": "user", "content": USER}])
    assert reply.content[0].text.replace(" ", "") == "echo:" + USER.replace(" ", "")  # type: ignore[union-attr]
    first, second = bedrock.requests
    assert first.json["messages"][0]["content"] == "tell me about [codename]"
    assert second.json["messages"][0]["content"] == USER
    assert first.signature_valid
    assert second.signature_valid


def test_flag_off_the_validation_exception_reaches_the_client(
    bedrock_gateway: Factory, bedrock: FakeBedrock, set_flag: Callable[[str], None]
) -> None:
    set_flag("false")
    url = bedrock_gateway(policy_config=REPLACE)
    bedrock.script(BedrockReply.exception("ValidationException", 400, "bad codename"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(sdk(url), False, messages=[{"role": "user", "content": USER}])
    assert caught.value.body["error"]["message"] == "bad codename"  # type: ignore[index]
    assert len(bedrock.requests) == 1


@pytest.mark.parametrize(
    ("name", "status"), [("AccessDeniedException", 403), ("ThrottlingException", 429)]
)
def test_credential_and_throttle_exceptions_never_fall_back(
    bedrock_gateway: Factory,
    bedrock: FakeBedrock,
    set_flag: Callable[[str], None],
    name: str,
    status: int,
) -> None:
    set_flag("true")
    url = bedrock_gateway(policy_config=REPLACE)
    bedrock.script(BedrockReply.exception(name, status))
    with pytest.raises(anthropic.APIStatusError) as caught:
        ask(sdk(url), False, messages=[{"role": "user", "content": USER}])
    assert caught.value.status_code == status
    assert len(bedrock.requests) == 1


# -------------------------------------------------------------- observability


def test_bedrock_request_id_is_on_the_call_log_line(
    bedrock_gateway: Factory, bedrock: FakeBedrock, gateway_stdout: GatewayStdout
) -> None:
    url = bedrock_gateway()
    response = raw(url, request_body())
    assert response.status_code == 200
    request_id = response.headers["request-id"]
    assert request_id.startswith("fake-bedrock-")
    gateway_stdout.until(lambda text: "call finished" in text)
    (line,) = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    assert line["upstream_request_id"] == request_id


def test_the_anthropic_provider_never_loads_the_bedrock_module() -> None:
    """The signer and the event-stream decoder stay off the default cold path."""
    code = (
        "import sys, time\n"
        "from policy_gateway.app import _build_gateway\n"
        "from policy_gateway.settings import Settings\n"
        "_build_gateway(Settings(), time.time)\n"
        "print(sorted(m for m in ('policy_gateway.upstream.bedrock.provider',"
        " 'policy_gateway.upstream.bedrock.eventstream', 'botocore.auth') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    # The last line: building the gateway logs the chain it loaded before it.
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_bad_bedrock_configuration_fails_the_start() -> None:
    with pytest.raises(ValueError, match=settings.ENV_UPSTREAM_PROVIDER):
        settings.Settings(upstream_provider="vertex")
    with pytest.raises(ValueError, match=settings.ENV_BEDROCK_MODEL_MAP):
        provider_for(settings.Settings(upstream_provider="bedrock", bedrock_model_map="[1, 2]"))


def test_bedrock_region_defaults_to_the_functions_region() -> None:
    region = {settings.ENV_AWS_REGION: "eu-central-1"}
    assert settings.Settings.from_env(region).bedrock_region == "eu-central-1"
    chosen = {**region, settings.ENV_BEDROCK_REGION: "us-east-1"}
    assert settings.Settings.from_env(chosen).bedrock_region == "us-east-1"


def test_count_tokens_answer_without_a_count_is_a_502(
    bedrock_gateway: Factory, bedrock: FakeBedrock
) -> None:
    url = bedrock_gateway()
    bedrock.script(BedrockReply(body={"unexpected": True}))
    response = raw(url, {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, COUNT)
    assert response.status_code == 502
    assert error_of(response.content)["type"] == "api_error"


@both
def test_bedrock_usage_is_on_the_call_line(
    bedrock_gateway: Factory,
    bedrock: FakeBedrock,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    usage = {
        "input_tokens": 321,
        "output_tokens": 45,
        "cache_creation_input_tokens": 6,
        "cache_read_input_tokens": 78,
    }
    answered = "claude-sonnet-4-5-20250929"
    if streaming:
        events = text_events(["one", " two"], model=answered)
        events[0][1]["message"]["usage"] = {**usage, "output_tokens": 1}
        events[-2][1]["usage"] = {"output_tokens": 45}
        bedrock.script(BedrockReply(stream=frames(events)))
    else:
        bedrock.script(BedrockReply(body=message("hi", model=answered) | {"usage": usage}))
    assert raw(bedrock_gateway(), request_body(stream=streaming)).status_code == 200
    gateway_stdout.until(lambda text: "call finished" in text)
    (line,) = [line for line in gateway_stdout.lines() if line.get("message") == "call finished"]
    assert {key: line[key] for key in ("model", *usage)} == {"model": answered, **usage}
