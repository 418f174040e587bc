"""Every family of the catalogue, in every place an agent sends it, redacted through the gateway.

One request holds each generated sample (tests/support/secret_samples.py: every family in a
.env line, YAML and JSON config, a shell session, a JSON tool result) four times: as user
text, as a tool result, as a string of a tool_use input in the assistant history, and as system
prompt and document text. Sent through the real gateway with the official SDK (JSON, stream,
count_tokens, batch creation) under a chain of `redact_secrets` with its default kinds and one
naming the opt-in personal-data kinds, the upstream must receive exactly the expected request:
every sample replaced by `[REDACTED:<its kind>]`, every other character and every field the API
needs byte for byte (ids, signatures, thinking, encrypted and base64 data, file ids,
cache_control, MCP credentials, each holding a secret here) unchanged.

The kind must be the sample's own, not merely some redaction covering it: the label is what
the model reads and what `kinds` selects, so a family reported under another's name is a
defect (a URL's `user:password@host` read as an e-mail address took the host with it). A
document family (a PEM key, a PuTTY file, a Kubernetes Secret) is one redaction spanning its
secrets inside the document; every other is exactly its secret.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from gateway_policies.detect.rules import pii

from .support.client import policy_chain
from .support.fake_upstream import FakeUpstream, api_rules
from .support.gateway import GatewayFactory
from .support.sdk import ask, both, count_and_batch, sdk
from .support.secret_samples import Sample, Value, placed, values
from .support.untouchable_request import KEY, TOKEN, untouchable_request

PII_KINDS = sorted({rule.kind for rule in pii.RULES})
# The personal-data kinds first: a card number under a credential's label (`X-Credential: …`)
# is also a generic secret, and the first policy to redact a value names it.
CHAIN = policy_chain(("redact_secrets", {"kinds": PII_KINDS}), ("redact_secrets", {}))

VALUES = values()
SAMPLES: list[tuple[Value, Sample]] = [(v, s) for v in VALUES for s in placed(v)]


def conversation() -> dict[str, Any]:
    texts = [sample.text for _, sample in SAMPLES]
    return untouchable_request(
        system=[{"type": "text", "text": text} for text in texts]
        + [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        question=[{"type": "text", "text": text} for text in texts]
        + [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": text},
            }
            for text in texts
        ],
        search={"query": "rotate keys"},
        call={f"s{index}": text for index, text in enumerate(texts)},
        result=[{"type": "text", "text": text} for text in texts],
        thinking=f"use {KEY} {TOKEN}",
        opaque=TOKEN,
        image=KEY + "AAAA",
    )


def expected(text: str, value: Value) -> str:
    """A non-document sample with each of its secrets replaced by its kind's mark."""
    for secret in value.secrets:
        text = text.replace(secret, f"[REDACTED:{value.kind}]")
    return text


def removed(original: str, sent: str, kind: str) -> list[tuple[int, int]]:
    """Where `sent` is `original` with spans replaced by `kind`'s mark: those spans."""
    pieces = sent.split(f"[REDACTED:{kind}]")
    assert original.startswith(pieces[0]), sent
    assert original.endswith(pieces[-1]), sent
    spans, at = [], len(pieces[0])
    for piece in pieces[1:-1]:
        found = original.find(piece, at + 1)
        assert found > at, (piece, sent)
        spans.append((at, found))
        at = found + len(piece)
    spans.append((at, len(original) - len(pieces[-1])))
    return spans


def check_document(original: str, sent: str, value: Value) -> None:
    """Redactions inside the document, of its kind, covering every secret."""
    low = original.index(value.value)
    spans = removed(original, sent, value.kind)
    assert all(low <= s < e <= low + len(value.value) for s, e in spans), (value.kind, sent)
    for secret in value.secrets:
        at = original.index(secret)
        assert any(s <= at and at + len(secret) <= e for s, e in spans), (value.kind, secret)


def places(body: dict[str, Any]) -> list[list[str]]:
    """The sample texts of each of the request's places, in sample order."""
    user, assistant, results = body["messages"]
    count = len(SAMPLES)
    return [
        [block["text"] for block in body["system"][:count]],
        [block["text"] for block in user["content"][:count]],
        [block["source"]["data"] for block in user["content"][count:]],
        [assistant["content"][4]["input"][f"s{index}"] for index in range(count)],
        [block["text"] for block in results["content"][0]["content"][:count]],
    ]


def check_sent(sent: dict[str, Any]) -> None:
    """Each sample as expected; with the samples put back, the request exactly as the client's."""
    original = conversation()
    for texts, sent_texts in zip(places(original), places(sent), strict=True):
        for text, sent_text, (value, sample) in zip(texts, sent_texts, SAMPLES, strict=True):
            if value.document:
                check_document(text, sent_text, value)
            else:
                assert sent_text == expected(text, value), (sample.kind, sample.context, sent_text)
    restored = copy.deepcopy(sent)
    _set_places(restored, places(original))
    generation: dict[str, Any] = {
        k: sent[k] for k in ("model", "max_tokens", "stream") if k in sent
    }
    assert restored == {**original, **generation}


def _set_places(body: dict[str, Any], texts: list[list[str]]) -> None:
    user, assistant, results = body["messages"]
    count = len(SAMPLES)
    for block, text in zip(body["system"][:count], texts[0], strict=True):
        block["text"] = text
    for block, text in zip(user["content"][:count], texts[1], strict=True):
        block["text"] = text
    for block, text in zip(user["content"][count:], texts[2], strict=True):
        block["source"]["data"] = text
    for index, text in enumerate(texts[3]):
        assistant["content"][4]["input"][f"s{index}"] = text
    for block, text in zip(results["content"][0]["content"][:count], texts[4], strict=True):
        block["text"] = text


def no_secret_on_the_wire(raw: bytes) -> None:
    left = [value.kind for value in VALUES for secret in value.secrets if secret.encode() in raw]
    assert left == []


@both
def test_every_family_in_every_place_is_redacted_through_the_gateway(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    upstream.rules = api_rules
    body = conversation()
    extra = {"mcp_servers": body.pop("mcp_servers")}
    ask(sdk(make_gateway(policy_config=CHAIN)), streaming, extra_body=extra, **body)
    [sent] = upstream.requests
    no_secret_on_the_wire(sent.body)
    check_sent(sent.json)


def test_count_tokens_and_batch_creation_redact_every_family(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    upstream.rules = api_rules
    client = sdk(make_gateway(policy_config=CHAIN))
    count_and_batch(client, conversation)
    counted, batch = upstream.requests
    for raw in (counted.body, batch.body):
        no_secret_on_the_wire(raw)
    check_sent(counted.json)
    check_sent(batch.json["requests"][0]["params"])


@pytest.mark.unit
def test_the_samples_cover_every_rule_and_their_secrets_reach_the_body() -> None:
    from gateway_policies.detect.rules import RULES

    assert {rule.kind for rule in RULES} <= {value.kind for value in VALUES}
    raw = str(conversation()).encode()
    assert all(secret.encode() in raw for value in VALUES for secret in value.secrets)
