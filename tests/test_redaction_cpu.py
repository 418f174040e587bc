"""redact_secrets stays linear on the worst text a client can send, and so do text windows.

A request body may hold up to the body limit of text, all of it in one text
slot, and every rule of the detector looks at all of it. Each rule meets inputs
cut from its own definition: runs built from each of its character classes
(`"a." * N` for the e-mail's local part) and repeated prefixes of a text it
redacts (`"jane.doe@example." * N`), which match almost to the end and then
fail, at every start. (bench/detect.py measures the same for the whole rule set.)
"""

from __future__ import annotations

import re
import string
import time
from collections.abc import Iterator
from typing import cast

import pytest
from gateway_policies.builtin.redact_secrets import RedactSecrets
from gateway_policies.detect import catalogue, detector
from gateway_policies.testing import run_request
from gateway_policies.text import WINDOW, subn_in_windows
from hypothesis import given
from hypothesis import strategies as st
from policy_gateway.routes.body import MAX_REQUEST_BYTES

from .support.client import policy_chain
from .support.client import user_request as request
from .support.crafted import EMAIL_REAL, around_units, blocks, repeated
from .support.fake_upstream import FakeUpstream
from .support.gateway import GatewayFactory
from .support.sdk import ask, both, sdk

# A text each pattern must redact, per alternative of the pattern: the
# pathological inputs are cut from these.
SAMPLES: dict[str, list[str]] = {
    "private_key": [
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
    ],
    "anthropic_api_key": ["sk-ant-api03-AbCdEf0123456789_xyz"],
    "aws_access_key_id": ["AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE"],
    "aws_secret_access_key": [
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        '"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    ],
    "github_token": ["ghp_" + "a1B2c3D4e5" * 4, "github_pat_" + "a1B2c3D4e5_" * 3],
    "bearer_token": ["Bearer abc123.def456-ghi~jkl+mno/pqr=="],
    "email": ["jane.doe+tag%x@mail-1.example.co.uk"],
}

# Generous: a linear pass over the body limit takes well under a second per
# input here; a quadratic one takes minutes on the first input.
CPU_SECONDS_PER_INPUT = 2.0
# The same inputs at growing sizes, each allowed its share of the budget: a
# quadratic pattern fails at a few kilobytes instead of running for an hour.
RAMP = (512, 64, 8, 1)
RAMP_FLOOR_SECONDS = 0.05

_CLASS = re.compile(r"\[(?:\\.|[^\]\\])+\]")


def character_classes(pattern: re.Pattern[str]) -> list[str]:
    """The printable characters of each bracket class in the pattern, in order."""
    return [
        "".join(c for c in string.printable if re.fullmatch(source, c))
        for source in _CLASS.findall(pattern.pattern)
    ]


def run_units(members: str) -> list[str]:
    """Units whose repetition is a long run of one class: letters and digits broken by each of
    its other characters in turn, as in `a.a.a.` and `a1.a1.` for an e-mail's local part."""
    letter = next((c for c in members if c.isalpha()), members[0])
    digit = next((c for c in members if c.isdigit()), "")
    others = [c for c in members if not c.isalnum()]
    heads = [letter, letter + digit]
    return [head + tail for head in heads for tail in ["", *others, "".join(others)]]


def prefix_units(sample: str) -> list[str]:
    """Prefixes of a text the pattern redacts: repeated, each start matches almost to the end."""
    cuts = {1, 2, 3, len(sample) // 4, len(sample) // 2, 3 * len(sample) // 4, len(sample) - 1}
    return [sample[:cut] for cut in sorted(cuts) if cut > 0]


RULES = {rule.kind: rule for rule in catalogue()}


def pathological_units(kind: str) -> list[str]:
    pattern = re.compile(RULES[kind].pattern)
    units = [u for members in character_classes(pattern) for u in run_units(members)]
    units += [u for sample in SAMPLES[kind] for u in prefix_units(sample)]
    return list(dict.fromkeys(units))


def cpu_seconds(policy: RedactSecrets, text: str) -> float:
    started = time.process_time()
    policy.rewrite(text)
    return time.process_time() - started


def test_every_core_kind_has_samples_it_redacts() -> None:
    for kind, samples in SAMPLES.items():
        policy = RedactSecrets({"kinds": [kind]})
        for sample in samples:
            out = run_request(policy, request(f"see {sample} here"))
            assert f"[REDACTED:{kind}]" in out["messages"][0]["content"], (kind, sample)


def test_the_inputs_come_from_each_patterns_own_classes() -> None:
    units = pathological_units("email")
    for expected in ("a.", "a-", "a0.", "a%", "a+", "jane.doe+tag%x@mail-1.example.co.u"):
        assert expected in units


@pytest.mark.load
@pytest.mark.parametrize("kind", list(SAMPLES))
def test_each_pattern_is_linear_at_the_body_limit(kind: str) -> None:
    policy = RedactSecrets({"kinds": [kind]})
    for unit in pathological_units(kind):
        for divisor in RAMP:
            size = MAX_REQUEST_BYTES // divisor
            allowed = max(RAMP_FLOOR_SECONDS, CPU_SECONDS_PER_INPUT / divisor)
            seconds = cpu_seconds(policy, repeated(unit, size))
            assert seconds <= allowed, (
                f"{kind}: {seconds:.2f} s of CPU for {size} bytes of {unit!r}... "
                f"(allowed {allowed:.2f} s): the pattern is not linear"
            )


# ------------------------------------------------- the e-mail pattern, in windows

# The e-mail pattern's shape with small bounds: a match is at most 4 + 1 + 3 + 2 * 4 characters.
SMALL_EMAIL = re.compile(r"\b[a-z0-9.%+\-]{1,4}+@[a-z0-9\-]{1,3}+(?:\.[a-z0-9\-]{1,3}){1,2}")
SMALL_LONGEST = 16


def bracketed(match: re.Match[str]) -> str:
    return f"<{match.group()}>"


@pytest.mark.unit
@given(st.text(alphabet="ab1.-+%@ \n", max_size=300), st.integers(1, 40))
def test_a_pass_in_windows_redacts_exactly_what_one_pass_does(text: str, window: int) -> None:
    expected = SMALL_EMAIL.subn(bracketed, text)
    assert subn_in_windows(SMALL_EMAIL, bracketed, text, SMALL_LONGEST, window) == expected


class Scans:
    """A pattern that notes how far each of its `finditer` calls may read."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.reads: list[int] = []

    def finditer(self, text: str, pos: int, endpos: int) -> Iterator[re.Match[str]]:
        self.reads.append(min(endpos, len(text)) - pos)
        return self.pattern.finditer(text, pos, endpos)


@pytest.mark.unit
def test_no_single_call_scans_more_than_a_window_at_the_body_limit() -> None:
    """One `re` call holds the interpreter lock: a window, not 6 MB, is the longest stall."""
    text = repeated("a.", MAX_REQUEST_BYTES) + " jo@ab.cd"
    scans = Scans(SMALL_EMAIL)
    pattern = cast("re.Pattern[str]", scans)
    redacted, found = subn_in_windows(pattern, bracketed, text, SMALL_LONGEST)
    assert (redacted, found) == SMALL_EMAIL.subn(bracketed, text)
    assert found == 1
    assert len(scans.reads) > MAX_REQUEST_BYTES // WINDOW
    assert max(scans.reads) <= WINDOW + SMALL_LONGEST


# ------------------------------------------- partial matches around real ones (issue 40)

# The whole catalogue on 6 MB in text blocks: generous, as CPU_SECONDS_PER_INPUT is; the
# bench's figure (14) holds the 1 s target. Before the confirmation went by the starts a
# reversed scan reports, the e-mail body alone cost about 12 s here.
AROUND_CPU_SECONDS = 2.0
EVERY_KIND = list(dict.fromkeys(rule.kind for rule in catalogue()))


@pytest.mark.load
@pytest.mark.parametrize("kind", list(around_units()))
def test_partial_matches_around_real_ones_cost_little_for_every_family(kind: str) -> None:
    policy = RedactSecrets({"kinds": EVERY_KIND})
    texts = blocks(around_units()[kind], MAX_REQUEST_BYTES)
    started = time.process_time()
    policy.rewrite_all(texts)
    seconds = time.process_time() - started
    assert seconds <= AROUND_CPU_SECONDS, f"{kind}: {seconds:.2f} s of CPU for 6 MB in blocks"


# Before the fix about 2 s of CPU per MB (a local part's run, then labels that never reach a
# dot, walked again from every start of a window as long as the rule's reach); after, tens of
# milliseconds. What the redaction adds is the call's CPU beside the same call through a chain
# that does nothing (the parse, the SDK and the upstream run in this process too).
GATEWAY_BODY = 2 * 1024 * 1024
GATEWAY_POLICY_CPU_SECONDS = 1.0


@pytest.mark.load
@both
def test_a_body_of_partial_addresses_around_real_ones_is_redacted_in_bounded_cpu(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    """Issue 40: runs of `a…a@b-b-b-` with a real address every ~800 characters cost the
    e-mail rule's confirmation ~7 s of CPU per MB, and another caller's call waited for it."""
    texts = blocks(around_units()["email"], GATEWAY_BODY)
    messages = [{"role": "user", "content": [{"type": "text", "text": t} for t in texts]}]
    # The detector compiles once per process (the gateway's init): not the call's work.
    detector()
    seconds = {}
    for policy in ("noop", "redact_secrets"):
        client = sdk(make_gateway(policy_config=policy_chain((policy, {}))))
        ask(client, streaming)
        started = time.process_time()
        assert ask(client, streaming, messages=messages).content
        seconds[policy] = time.process_time() - started
    sent = upstream.requests[-1].json["messages"][0]["content"]
    received = "".join(block["text"] for block in sent)
    expected = "".join(texts).replace(EMAIL_REAL, "[REDACTED:email]")
    assert received == expected
    assert received.count("[REDACTED:email]") > 1500
    added = seconds["redact_secrets"] - seconds["noop"]
    assert added <= GATEWAY_POLICY_CPU_SECONDS, f"{added:.2f} s of CPU added by the redaction"
