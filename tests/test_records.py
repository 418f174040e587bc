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
from collections.abc import Iterator
from functools import partial
from typing import Any

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

from .conftest import PutSecret
from .support.clock import ManualClock
from .support.fake_upstream import FakeUpstream, Reply, message, text_events
from .support.gateway import GatewayFactory, GatewayStdout
from .support.records import (
    ALICE_KEY,
    DOCUMENT,
    SECRET,
    Starter,
    converse,
    finished,
    json_call,
    start_gateway,
    stream_call,
    turn,
)
from .support.sdk import client
from .support.servers import free_port

BUCKET = "policy-gateway-records-test"
TTL = 0.5


@pytest.fixture
def start(make_gateway: GatewayFactory, put_secret: PutSecret) -> Starter:
    return partial(start_gateway, make_gateway, put_secret)


@pytest.fixture
def bucket(moto_endpoint: str) -> S3Store:
    s3: Any = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    return S3Store(BUCKET, s3)


def every_object(store: RecordStore) -> dict[str, bytes]:
    return {obj.key: store.get(obj.key) for obj in store.list()}


def test_a_recorded_conversation_is_rebuilt_exactly_and_holds_no_removed_secret(
    start: Starter, bucket: S3Store, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = start(records_bucket=BUCKET)
    conversed = converse(url, upstream, gateway_stdout)
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
    for call, body in zip(conversation.calls, conversed.sent, strict=True):
        upstream_messages = spans.members(body.decode(), frozenset({"messages"}))
        by_key = {member.key: member for member in upstream_messages}
        assert conversation.messages(call) == list(by_key["messages"].items or ())
        assert dict(call.params) == {
            key: member.text for key, member in by_key.items() if key not in layout._APART
        }
        assert call.system == layout.text_digest(by_key["system"].text)
    calls = conversation.calls
    assert calls[0].answer == conversed.json_answers[0].decode()
    assert calls[3].answer == conversed.json_answers[1].decode()
    for call, reply in zip(calls[1:3], conversed.streamed, strict=True):
        recorded = json.loads(call.answer)
        assert recorded["content"] == [block.to_dict() for block in reply.content]
        assert recorded["stop_reason"] == reply.stop_reason
        assert recorded["usage"]["output_tokens"] == reply.usage.output_tokens
    # The edit is a second child of the first call, beside the turn that went on.
    assert calls[1].parent == calls[2].parent == calls[0].digest
    assert calls[3].parent == calls[1].digest
    assert [call.call_id for call in conversation.line(calls[2])] == [
        calls[0].call_id,
        calls[2].call_id,
    ]
    assert [c.call_id for c in conversation.line()] == [
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
    start: Starter,
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
    start: Starter, tmp_path: Any, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = start(records_dir=str(tmp_path))
    alice = client(url, api_key=ALICE_KEY)
    upstream.script(Reply(body=message("in a folder")))
    json_call(alice, [turn("hello")])
    finished(gateway_stdout, 1)
    (conversation,) = Archive(FolderStore(tmp_path)).load()
    assert json.loads(conversation.calls[0].answer)["content"][0]["text"] == "in a folder"
    assert (tmp_path / "alice").is_dir()


def test_recording_follows_the_live_document_within_its_ttl(
    make_gateway: GatewayFactory,
    ssm: Any,
    clock: ManualClock,
    tmp_path: Any,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
) -> None:
    def put(record: bool) -> None:
        document = {"policies": [], "record": {"enabled": record}}
        ssm.put_parameter(
            Name=settings.DEFAULT_POLICY_CONFIG_PARAMETER,
            Value=json.dumps(document),
            Type="String",
            Overwrite=True,
        )

    put(False)
    url = make_gateway(
        policy_config_parameter=settings.DEFAULT_POLICY_CONFIG_PARAMETER,
        policy_config_ttl=TTL,
        clock=clock,
        records_dir=str(tmp_path),
    )
    sdk = client(url, api_key="sk-ant-live-0123456789")
    upstream.script(Reply(body=message("not kept")))
    json_call(sdk, [turn("one")])
    put(True)
    clock.advance(TTL + 0.1)
    upstream.script(Reply(body=message("kept")))
    json_call(sdk, [turn("two")])
    finished(gateway_stdout, 2)
    (conversation,) = Archive(FolderStore(tmp_path)).load()
    assert json.loads(conversation.calls[0].answer)["content"][0]["text"] == "kept"
