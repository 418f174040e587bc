"""Recorded conversations through the real gateway (issue 43), with the official SDK.

Alice's calls are recorded (`"record": {"enabled": true}` in her `callers` entry),
Bob's are not. Her conversation (JSON and stream turns, a redacted secret, a
blocked tool call, an edited turn) is rebuilt from moto's S3 exactly: every
message byte for byte as the upstream received it, every answer as the SDK
received it; the secret is nowhere in the bucket; Bob has no record. A stopped
stand-in S3 leaves the calls intact and counts RecordFailures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import boto3
import pytest
from gateway_policies import PolicyConfigError
from moto.server import ThreadedMotoServer
from policy_gateway import names, settings
from policy_gateway.policy_source import PolicySource
from policy_gateway.records import layout, spans
from policy_gateway.records.archive import BLOCKED, REDACTED, Archive
from policy_gateway.records.store import FolderStore, RecordStore, S3Store
from policy_gateway.records.transcript import transcript

from .conftest import KEYS_SECRET, UPSTREAM_SECRET, PutSecret
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message, text_events
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import client
from .support.servers import free_port, wait_ready
from .support.tool_calls import BASH_RM, TOOLS, tool_reply

BUCKET = "policy-gateway-records-test"
ALICE_KEY = "gk-alice-0123456789abcdef"
BOB_KEY = "gk-bob-0123456789abcdef"
KEYS = {"keys": [{"name": "alice", "key": ALICE_KEY}, {"name": "bob", "key": BOB_KEY}]}
SECRET = "AKIAIOSFODNN7EXAMPLE"
CHAIN = [
    {"policy": "redact_secrets"},
    {"policy": "block_tool_calls", "options": {"rules": [BASH_RM]}},
]
DOCUMENT = {
    "policies": CHAIN,
    "callers": {"alice": {"policies": CHAIN, "record": {"enabled": True}}},
}
SYSTEM: Any = [{"type": "text", "text": "You are a careful coding agent. " * 40}]

Start = Callable[..., str]


@pytest.fixture
def start(make_gateway: GatewayFactory, put_secret: PutSecret) -> Start:
    put_secret(KEYS_SECRET, json.dumps(KEYS))
    put_secret(UPSTREAM_SECRET, json.dumps({"api_key": "sk-ant-upstream"}))

    def start(**overrides: Any) -> str:
        url = make_gateway(
            auth_mode=settings.AUTH_GATEWAY_KEY,
            gateway_keys_secret=KEYS_SECRET,
            upstream_api_key_secret=UPSTREAM_SECRET,
            policy_config=json.dumps(DOCUMENT),
            **overrides,
        )
        wait_ready(url)  # the keys read at start-up, however slow the machine
        return url

    return start


@pytest.fixture
def bucket(moto_endpoint: str) -> S3Store:
    s3: Any = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    return S3Store(BUCKET, s3)


def turn(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def said(reply: anthropic.types.Message) -> dict[str, Any]:
    """An answer as a client resends it on the next turn."""
    return {"role": "assistant", "content": [block.to_dict() for block in reply.content]}


def json_call(sdk: anthropic.Anthropic, messages: Any) -> tuple[bytes, Any]:
    raw = sdk.messages.with_raw_response.create(
        model=MODEL, max_tokens=256, system=SYSTEM, tools=TOOLS, messages=messages
    )
    return raw.http_response.content, raw.parse()


def stream_call(sdk: anthropic.Anthropic, messages: Any) -> Any:
    with sdk.messages.stream(
        model=MODEL, max_tokens=256, system=SYSTEM, tools=TOOLS, messages=messages
    ) as events:
        return events.get_final_message()


def finished(stdout: GatewayStdout, calls: int) -> list[dict[str, Any]]:
    """The call lines, once `calls` were written: each is written after its record."""
    stdout.until(lambda text: text.count('"call finished"') >= calls, timeout=30)
    lines = stdout.call_lines(calls)
    assert len(lines) == calls
    return lines


def every_object(store: RecordStore) -> dict[str, bytes]:
    return {obj.key: store.get(obj.key) for obj in store.list()}


def test_a_recorded_conversation_is_rebuilt_exactly_and_holds_no_removed_secret(
    start: Start, bucket: S3Store, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = start(records_bucket=BUCKET)
    alice, bob = client(url, api_key=ALICE_KEY), client(url, api_key=BOB_KEY)
    first = [turn(f"deploy with {SECRET} please")]
    upstream.script(tool_reply(False, ("bash", {"command": "rm -rf /"}), text="Sure."))
    body1, reply1 = json_call(alice, first)
    assert [block.type for block in reply1.content] == ["text", "text"]  # the call, replaced
    second = [*first, said(reply1), turn("what happened?")]
    upstream.script(Reply(events=text_events(["It was ", "blocked."])))
    reply2 = stream_call(alice, second)
    edited = [*first, said(reply1), turn(f"try again, key {SECRET}")]
    upstream.script(Reply(events=text_events(["Trying."])))
    reply3 = stream_call(alice, edited)
    fourth = [*second, said(reply2), turn("thanks")]
    upstream.script(Reply(body=message("You are welcome.")))
    body4, _ = json_call(alice, fourth)
    sent = [request.body for request in upstream.requests]
    upstream.script(Reply(body=message("hello bob")))
    json_call(bob, first)
    finished(gateway_stdout, 5)

    objects = every_object(bucket)
    assert objects
    assert all(key.startswith("alice/") for key in objects)
    for text in objects.values():
        assert SECRET.encode() not in text
    assert any(b"[REDACTED:aws_access_key_id]" in text for text in objects.values())
    blobs = [key for key in objects if f"/{layout.BLOBS}/" in key]
    assert len(blobs) == 2  # one system prompt, one tool list, for four calls

    (conversation,) = Archive(bucket).load()
    assert conversation.caller == "alice"
    assert len(conversation.calls) == 4
    assert conversation.branches == 1
    assert {BLOCKED, REDACTED} <= conversation.marks()
    for call, body in zip(conversation.calls, sent, strict=True):
        upstream_messages = spans.members(body.decode(), frozenset({"messages"}))
        by_key = {member.key: member for member in upstream_messages}
        assert conversation.messages(call) == list(by_key["messages"].items or ())
        assert dict(call.params) == {
            key: member.text for key, member in by_key.items() if key not in layout._APART
        }
        assert call.system == layout.text_digest(by_key["system"].text)
    calls = conversation.calls
    assert calls[0].answer == body1.decode()
    assert calls[3].answer == body4.decode()
    for call, reply in ((calls[1], reply2), (calls[2], reply3)):
        recorded = json.loads(call.answer)
        assert recorded["content"] == [block.to_dict() for block in reply.content]
        assert recorded["stop_reason"] == reply.stop_reason
        assert recorded["usage"]["output_tokens"] == reply.usage.output_tokens
    # The edit is a second child of the first call, beside the turn that went on.
    assert calls[1].parent == calls[2].parent == calls[0].digest
    assert calls[3].parent == calls[1].digest
    assert [call.call_id for call in conversation.line()] == [
        calls[0].call_id,
        calls[2].call_id,
    ]
    assert [c.call_id for c in conversation.line(calls[1])] == [
        calls[0].call_id,
        calls[1].call_id,
        calls[3].call_id,
    ]
    shown = [entry.text for entry in transcript(conversation, calls[3])]
    assert "1 secret redacted here: aws_access_key_id" in shown
    assert any(text.startswith("this call blocked by block_tool_calls: bash") for text in shown)
    meta = calls[0].meta
    assert meta["chain"] == "alice"
    assert meta["status"] == 200
    assert meta["chain_version"].startswith("inline:")


@pytest.fixture
def stoppable_s3(
    monkeypatch: pytest.MonkeyPatch, moto_endpoint: str
) -> Iterator[ThreadedMotoServer]:
    """An S3 stand-in of the test's own, which the test may stop."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{port}")
    s3: Any = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


def test_a_failed_write_leaves_the_call_intact_and_is_counted(
    start: Start,
    stoppable_s3: ThreadedMotoServer,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
) -> None:
    url = start(records_bucket=BUCKET)
    alice = client(url, api_key=ALICE_KEY)
    upstream.script(Reply(body=message("stored")))
    _, stored = json_call(alice, [turn("one")])
    assert stored.content[0].text == "stored"
    # The client has its answer before the record is stored: wait for the store.
    finished(gateway_stdout, 1)
    stoppable_s3.stop()
    upstream.script(Reply(body=message("still answered")))
    _body, reply = json_call(alice, [turn("two")])
    assert reply.content[0].text == "still answered"
    upstream.script(Reply(events=text_events(["streamed ", "anyway"])))
    final = stream_call(alice, [turn("three")])
    assert "".join(b.text for b in final.content if b.type == "text") == "streamed anyway"
    assert [line["status"] for line in finished(gateway_stdout, 3)] == [200, 200, 200]
    assert gateway_stdout.counted(names.METRIC_RECORD_FAILURES) == 2
    warnings = [
        line
        for line in gateway_stdout.lines()
        if line.get("message", "").startswith("call not recorded")
    ]
    assert len(warnings) == 2
    assert all(line["level"] == "WARNING" for line in warnings)
    assert {line["caller"] for line in warnings} == {"alice"}


def test_recording_without_a_store_is_refused_at_load() -> None:
    with pytest.raises(PolicyConfigError, match="RECORDS_BUCKET"):
        PolicySource(json.dumps(DOCUMENT), None)._parsed(json.dumps(DOCUMENT))
    assert PolicySource(json.dumps(DOCUMENT), None).version is None
    loaded = PolicySource(json.dumps(DOCUMENT), None, records_configured=True)
    assert loaded.version is not None


def test_the_folder_store_keeps_the_same_format(
    start: Start, tmp_path: Any, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = start(records_dir=str(tmp_path))
    alice = client(url, api_key=ALICE_KEY)
    upstream.script(Reply(body=message("in a folder")))
    json_call(alice, [turn("hello")])
    finished(gateway_stdout, 1)
    (conversation,) = Archive(FolderStore(tmp_path)).load()
    assert json.loads(conversation.calls[0].answer)["content"][0]["text"] == "in a folder"
    assert (tmp_path / "alice").is_dir()
