"""The memo's bound holds through the real gateway (issue 40, item 14).

The gateway serializes each request for the upstream with orjson, which leaves a string
that is not ASCII holding its UTF-8 form too: a text the memo keeps (the redacted form of a
tool result) grows after the memo counted it. Many callers, each with an API key of its own
(a memo partition per call), send such texts through the official SDK; what the memo's
redacted texts hold afterwards, as Python measures them now, stays within its bound.
"""

from __future__ import annotations

import random
import string
import sys

import anthropic
from gateway_policies.detect.memo import MEMO

from .support.client import policy_chain
from .support.fake_upstream import FakeUpstream, api_rules
from .support.gateway import GatewayFactory
from .support.sdk import ask, both, tool_result

BOUND = 64 * 1024
CALLS = 60
CHAIN = policy_chain(("redact_secrets", {}))


def text(rng: random.Random) -> str:
    """About 2 KB of a tool's output, not ASCII, with an AWS key in it."""
    words = [
        "".join(rng.choices(string.ascii_lowercase + "éü€", k=rng.randint(3, 9)))
        for _ in range(260)
    ]
    key = "AKIA" + "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", k=16))
    return " ".join(words[:130]) + f" aws_access_key_id = {key} " + " ".join(words[130:])


@both
def test_what_the_memo_keeps_stays_within_its_bound_after_the_gateway_serialized_it(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    upstream.rules = api_rules
    url = make_gateway(policy_config=CHAIN, policy_memo_bytes=BOUND)
    rng = random.Random(40)
    for call in range(CALLS):
        client = anthropic.Anthropic(base_url=url, api_key=f"sk-ant-caller-{call}", max_retries=0)
        ask(client, streaming, **tool_result(text(rng)))
    assert all(b"AKIA" not in sent.body for sent in upstream.requests)
    kept = [
        redacted
        for table in list(MEMO._tables.values())
        for (_, _, redacted), _ in list(table.values())
    ]
    assert kept, "the memo kept no redacted text"
    held = sum(sys.getsizeof(redacted) for redacted in kept)
    assert held <= BOUND, f"the memo's redacted texts hold {held} bytes for a bound of {BOUND}"
