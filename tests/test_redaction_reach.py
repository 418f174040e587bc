"""redact_secrets reaches every field the upstream reads as text, and nothing else.

Through the real gateway with the official SDK (JSON and stream), count_tokens and
batch creation: secrets in the tool_use / server_tool_use inputs of the history are
redacted, the request still passes the API's rules (the simulator's checks), and the
fields the API needs byte for byte (ids, signatures, thinking, encrypted and base64
data, file ids, cache_control, MCP credentials) never change. And the memo never
changes a result.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from gateway_policies.base import PolicyContext
from gateway_policies.builtin.redact_secrets import RedactSecrets
from gateway_policies.detect.memo import MEMO, configure
from gateway_policies.testing import run_request

from .support.client import policy_chain
from .support.fake_upstream import MODEL, FakeUpstream, api_rules
from .support.gateway import GatewayFactory
from .support.sdk import ask, both, count_and_batch, sdk
from .support.untouchable_request import KEY, TOKEN, untouchable_request

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
# Valid base64 that holds a key's text: image data is never text.
DATA = "QUtJQUlPU0ZPRE5ON0VYQU1QTEU" + KEY + "AAAA"


def conversation() -> dict[str, Any]:
    return untouchable_request(
        system=[{"type": "text", "text": f"ops key {KEY}", "cache_control": {"type": "ephemeral"}}],
        question="deploy it",
        search={"query": f"who owns {KEY}"},
        call={
            "command": f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
            "env": [f"TOKEN={TOKEN}", {"deep": [f"id {KEY}"]}],
            "count": 3,
        },
        result=[{"type": "text", "text": f"done {TOKEN}"}],
        thinking=f"use {KEY}",
        opaque=KEY,
        image=DATA,
        attachments=[
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": DATA},
            }
        ],
    )


def without_text(request: dict[str, Any]) -> dict[str, Any]:
    """The request with every field redact_secrets may change taken out."""
    kept = copy.deepcopy(request)
    kept.pop("system")
    history = kept["messages"]
    history[0].pop("content")
    history[1]["content"][2].pop("input")
    history[1]["content"][4].pop("input")
    history[2]["content"][0]["content"][0].pop("text")
    history[2]["content"][3].pop("text")
    return kept


def check_redacted(sent: dict[str, Any]) -> None:
    assert without_text(sent) == without_text({**conversation(), **_generation(sent)})
    assert sent["system"][0]["text"] == "ops key [REDACTED:aws_access_key_id]"
    tool_use = sent["messages"][1]["content"][4]["input"]
    assert tool_use == {
        "command": "export AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]",
        "env": ["TOKEN=[REDACTED:github_token]", {"deep": ["id [REDACTED:aws_access_key_id]"]}],
        "count": 3,
    }
    assert sent["messages"][1]["content"][2]["input"] == {
        "query": "who owns [REDACTED:aws_access_key_id]"
    }
    assert sent["messages"][2]["content"][0]["content"][0]["text"] == (
        "done [REDACTED:github_token]"
    )


def _generation(sent: dict[str, Any]) -> dict[str, Any]:
    return {key: sent[key] for key in ("model", "max_tokens", "stream") if key in sent}


@pytest.mark.unit
def test_only_text_fields_change() -> None:
    check_redacted(run_request(RedactSecrets(), {"model": MODEL, **conversation()}))


@both
def test_tool_inputs_in_history_are_redacted_through_the_gateway(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    upstream.rules = api_rules
    url = make_gateway(policy_config=policy_chain(("redact_secrets", {})))
    body = conversation()
    ask(sdk(url), streaming, extra_body={"mcp_servers": body.pop("mcp_servers")}, **body)
    [sent] = upstream.requests
    for secret in (AWS_SECRET.encode(), b"TOKEN=" + TOKEN.encode()):
        assert secret not in sent.body
    check_redacted(sent.json)


def test_count_tokens_and_batch_creation_redact_the_same_fields(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    upstream.rules = api_rules
    client = sdk(make_gateway(policy_config=policy_chain(("redact_secrets", {}))))
    count_and_batch(client, conversation)
    counted, batch = upstream.requests
    check_redacted(counted.json)
    check_redacted(batch.json["requests"][0]["params"])


# ------------------------------------------------------------------------ memo

PIECES = [f"see {KEY}", f"TOKEN={TOKEN}", "plain text", "mail jo@example.com", "x" * 300, "é😀"]


def session(seed: int) -> list[dict[str, Any]]:
    """A random agent session: each turn resends the history and adds a tool call and result."""
    pick = random.Random(seed)
    history: list[dict[str, Any]] = [{"role": "user", "content": pick.choice(PIECES)}]
    turns = []
    for turn in range(8):
        history += [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn}",
                        "name": "bash",
                        "input": {"command": " ".join(pick.choices(PIECES, k=2))},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{turn}",
                        "content": " ".join(pick.choices(PIECES, k=3)),
                    },
                ],
            },
        ]
        turns.append({"model": MODEL, "max_tokens": 10, "messages": copy.deepcopy(history)})
    return turns


@pytest.fixture
def memo_on() -> Any:
    configure(1 << 20)
    yield MEMO
    configure(0)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(5))
def test_the_memo_never_changes_a_result(seed: int, memo_on: Any) -> None:
    turns = session(seed)
    with_memo = RedactSecrets()
    remembered = [json.dumps(run_request(with_memo, turn)) for turn in turns]
    assert len(MEMO) > 0
    configure(0)
    without = RedactSecrets()
    assert [json.dumps(run_request(without, turn)) for turn in turns] == remembered


@pytest.mark.unit
def test_a_new_chain_or_rule_set_does_not_read_the_old_entries(memo_on: Any) -> None:
    text = f"see {KEY}"
    first = RedactSecrets()
    first.rewrite(text)
    entries = len(MEMO)
    RedactSecrets().rewrite(text)  # a reloaded chain: a new instance
    RedactSecrets({"kinds": ["email"]}).rewrite(text)  # another rule set
    assert len(MEMO) == entries + 2
    assert RedactSecrets({"kinds": ["email"]}).rewrite(text) == text


@pytest.mark.unit
def test_the_memo_stays_within_its_bytes(memo_on: Any) -> None:
    configure(4096)
    policy = RedactSecrets()
    for index in range(200):
        policy.rewrite(f"text {index} {KEY}")
    assert 0 < MEMO.bytes <= 4096


def caller_context(caller: str) -> PolicyContext:
    return PolicyContext(endpoint="messages", stream=False, call_id="test-call", caller=caller)


@pytest.mark.unit
def test_two_callers_never_share_entries(memo_on: Any) -> None:
    """xxh3 is not collision-resistant: an entry one caller's crafted text planted (here,
    "nothing found" for a text holding a key) misleads that caller alone."""
    policy = RedactSecrets()
    text = f"export AWS_ACCESS_KEY_ID={KEY}  # {'x' * 80}"
    request = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": text}]}
    MEMO.remember(policy.partition, "mallory", text, lambda _: ((), {}, ""))
    assert run_request(policy, request, ctx=caller_context("mallory")) == request
    for caller in ("alice", "bob"):
        sent = run_request(policy, request, ctx=caller_context(caller))
        assert sent["messages"][0]["content"].startswith(
            "export AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]"
        )


@pytest.mark.unit
def test_texts_alike_in_utf16_keep_their_own_entries(memo_on: Any) -> None:
    """A surrogate pair written as two characters has the UTF-16 of the one character it
    pairs to, but not its indices: each keeps its own entry."""
    tail = " " + "y" * 80 + f" {KEY}"
    texts = ["\U0001f600" + tail, "\ud83d\ude00" + tail, "\U0001f600" + tail]
    policy = RedactSecrets()
    remembered = [policy.rewrite(text) for text in texts]
    configure(0)
    assert remembered == [RedactSecrets().rewrite(text) for text in texts]


@pytest.mark.unit
def test_one_batch_scans_each_new_text_once_and_keeps_its_order(memo_on: Any) -> None:
    """The batch loop the hook runs: a text met twice in one batch (long, or short and
    clean) is scanned once, and each text gets its own entry back, in order."""
    policy = RedactSecrets()
    long_text = f"{'z' * 80} {KEY}"
    texts = [long_text, "short", long_text, "short", f"key {KEY}"]
    scanned: list[str] = []

    def scan(text: str) -> Any:
        scanned.append(text)
        return policy.scanned(text)

    entries = MEMO.remember_all(policy.partition, "alice", texts, scan)
    assert scanned == [long_text, "short", f"key {KEY}"]
    assert entries == [policy.scanned(text) for text in texts]
    assert MEMO.remember_all(policy.partition, "alice", texts, scan) == entries
    assert len(scanned) == 3
    configure(0)
    assert policy.rewrite_all(texts) == RedactSecrets().rewrite_all(texts)


@pytest.mark.unit
def test_the_memo_keeps_a_text_as_redacted_never_its_secret(memo_on: Any) -> None:
    policy = RedactSecrets()
    text = f"deploy with {KEY} and {TOKEN} " + "x" * 80
    request = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": text}]}
    first = run_request(policy, request)
    entries = [entry for table in MEMO._tables.values() for entry, _ in table.values()]
    assert [redacted for _, _, redacted in entries] == [first["messages"][0]["content"]]
    assert KEY not in entries[0][2]
    assert TOKEN not in entries[0][2]
    held = sum(cost for table in MEMO._tables.values() for _, cost in table.values())
    assert held >= len(entries[0][2])
    assert run_request(policy, request) == first
