"""The detector (gateway_policies.detect): its contract, and its engine held to plain `re`.

The Hyperscan engine must find exactly what one `re.finditer` pass of each rule
finds (the reference engine), on random text and on text cut from the rules
themselves (keywords, alphabets, near matches, non-ASCII and lone surrogates
around them); hits are string indices into the decoded text; the engine is
compiled once per process and rule set, with a scratch space per thread; a
dense text falls back to one whole-value match; the reversed scan reports every
start `re` would match at, on partial matches around real ones too.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import pytest
from gateway_policies import detect
from gateway_policies.detect import Detector, Hit, catalogue, catalogue_version, detector, scan
from gateway_policies.detect.engine import (
    CONFIRM_CHARACTERS,
    EVENTS_FLOOR,
    LONG_REACH,
    HyperscanEngine,
    one_byte_per_character,
)
from gateway_policies.detect.reference import ReferenceEngine
from gateway_policies.detect.reverse import reversed_pattern
from gateway_policies.detect.ruleset import RuleSet
from hypothesis import given, settings
from hypothesis import strategies as st

from .support.crafted import EMAIL_PARTIAL, EMAIL_REAL, around_units

pytestmark = pytest.mark.unit

ALL = RuleSet(catalogue())
ENGINE = HyperscanEngine(ALL)
REFERENCE = ReferenceEngine(ALL)
_CLASS = re.compile(r"\[(?:\\.|[^\]\\])+\]")

SAMPLES = [
    "AKIAIOSFODNN7EXAMPLE",
    "sk-ant-api03-AbCdEf0123456789_xyz",
    "ghp_" + "a1B2c3D4e5" * 4,
    "github_pat_" + "a1B2c3D4e5_" * 3,
    "Bearer abc123.def456-ghi~jkl+mno/pqr==",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "jane.doe+tag%x@mail-1.example.co.uk",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n",
]


def _pieces() -> list[str]:
    """Fragments cut from the rules: their keywords, a few members of each class, samples."""
    pieces = {" ", "\n", "\t", "=", ":", '"', "'", "é", "日本", "\ud800", "😀", "\\", "-", "_", "."}
    for rule in catalogue():
        pieces.update(rule.keywords)
        pieces.update(keyword.upper() for keyword in rule.keywords)
        for source in _CLASS.findall(rule.pattern)[:6]:
            members = [chr(c) for c in range(32, 127) if re.fullmatch(source, chr(c))]
            pieces.update(members[:: max(1, len(members) // 5)])
            pieces.add("".join(members[:12]))
    for sample in SAMPLES:
        pieces.update(sample[:cut] for cut in range(1, len(sample) + 1, 3))
        pieces.add(sample)
    return sorted(pieces)


PIECES = _pieces()


def same_as_reference(text: str) -> None:
    assert sorted(ENGINE.find(text)) == sorted(REFERENCE.find(text)), text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60))
def test_the_engine_finds_what_re_finds_on_text_cut_from_the_rules(pieces: list[str]) -> None:
    same_as_reference("".join(pieces))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_the_engine_finds_what_re_finds_on_random_text(text: str) -> None:
    same_as_reference(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=8), st.text(max_size=30))
def test_adjacent_samples_with_anything_between_them(samples: list[str], glue: str) -> None:
    same_as_reference(glue.join(samples))


def _around_pieces() -> list[str]:
    """Partial matches and real ones of every family (tests/support/crafted.py), cut short."""
    pieces = {EMAIL_PARTIAL[::7], EMAIL_REAL, " ", "\n", "-", "@", "."}
    for unit in around_units().values():
        partial, _, real = unit.rpartition("\n\n")[0].rpartition("\n")
        pieces.update({partial[:200], partial[-120:], real[-300:]})
    return sorted(pieces)


AROUND = _around_pieces()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(AROUND), max_size=12))
def test_the_engine_finds_what_re_finds_on_partial_matches_around_real_ones(
    pieces: list[str],
) -> None:
    same_as_reference("".join(pieces))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=25))
def test_the_reversed_scan_reports_every_start_of_a_match(pieces: list[str]) -> None:
    """Every position where `re` matches a rule found by its own pattern is among the starts
    the rule's reversed pattern reports, so trying only those finds everything."""
    text = "".join(pieces)
    starts, dense = ENGINE._match_starts(
        one_byte_per_character(text), [(0, len(text))], budget=len(text) * len(ALL.rules) + 1
    )
    assert dense is None
    for index in ENGINE._reversible:
        pattern = ALL.compiled[index]
        expected = {at for at in range(len(text) + 1) if pattern.match(text, at)}
        assert expected <= set(starts.get(index, ())), (ALL.rules[index].kind, text)


def test_every_rule_found_by_its_pattern_has_a_reversed_one() -> None:
    by_pattern = [
        n for n, rule in enumerate(ALL.rules) if rule.max_length <= LONG_REACH and rule.lead is None
    ]
    assert len(by_pattern) > len(ALL.rules) / 2
    assert set(by_pattern) <= set(ENGINE._reversible)
    backwards = re.compile(reversed_pattern(r"(?:^|[^a-z])(?P<secret>a(?i:B)[0-9]{2,3})(?:\b|$)"))
    assert backwards.fullmatch("\n123ba")
    assert backwards.fullmatch("21Ba-")
    assert not backwards.search("1ba")
    assert not backwards.fullmatch("21bax")


def test_every_sample_is_found() -> None:
    for sample in SAMPLES:
        assert ENGINE.find(f"x {sample} y"), sample


def test_indices_are_string_indices_past_non_ascii_text() -> None:
    key = "AKIAIOSFODNN7EXAMPLE"
    text = f"日本語 😀 \ud800 é {key} ünï"
    [hit] = scan([text], ["aws_access_key_id"])
    assert text[hit.start : hit.end] == key


def test_the_contract_slots_spans_and_kinds() -> None:
    texts = ["nothing here", "mail jane@example.com", "AKIAIOSFODNN7EXAMPLE"]
    assert scan(texts) == [
        Hit(1, 5, 21, "email"),
        Hit(2, 0, 20, "aws_access_key_id"),
    ]
    assert scan(texts, ["email"]) == [Hit(1, 5, 21, "email")]
    assert detect.CONTRACT == 1


def test_one_engine_per_process_and_rule_set() -> None:
    assert detector() is detector(None)
    assert detector(["email", "github_token"]) is detector(["github_token", "email"])
    assert detector(["email"]) is not detector()


def test_the_version_names_the_rules() -> None:
    assert catalogue_version() == RuleSet(catalogue()).version
    first = catalogue()[0]
    changed = RuleSet((replace(first, max_length=first.max_length + 1), *catalogue()[1:]))
    assert changed.version != catalogue_version()
    assert RuleSet.of(catalogue(), ["email"]).version != RuleSet.of(catalogue()).version


def test_one_scratch_space_per_thread() -> None:
    text = "token AKIAIOSFODNN7EXAMPLE " * 2000
    expected = ENGINE.find(text)
    results: list[object] = []

    def work() -> None:
        for _ in range(20):
            results.append(ENGINE.find(text) == expected)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 80


def test_a_text_with_too_many_ends_is_one_whole_value_match() -> None:
    text = "a@b.io " * (2 * EVENTS_FLOOR)
    assert Detector(ENGINE).find(text) == [("email", (0, len(text)))]


def test_a_text_with_too_much_to_confirm_is_one_whole_value_match() -> None:
    text = "AKIAIOSFODNN7EXAMPLE " * (CONFIRM_CHARACTERS // 20)
    assert Detector(ENGINE).find(text) == [("aws_access_key_id", (0, len(text)))]


def test_a_sparse_text_is_confirmed_match_by_match() -> None:
    text = ("x" * 200 + " AKIAIOSFODNN7EXAMPLE ") * 100
    assert len(ENGINE.find(text)) == 100


@pytest.mark.unit
def test_a_url_password_is_not_read_as_an_address() -> None:
    text = "DATABASE_URL=postgres://app:s3cr3t%21Pass@db.internal:5432/x mailto:jo@corp.example"
    found = [(text[start:end], kind) for _, start, end, kind in scan([text])]
    assert sorted(found) == [("jo@corp.example", "email"), ("s3cr3t%21Pass", "url_password")]


@pytest.mark.parametrize("glue", [",", " ", "\\n", "\n"])
def test_keys_one_delimiter_apart_are_each_found(glue: str) -> None:
    """A rule consumes the delimiters around its token (it cannot look behind); the next search
    starts where the secret ended, so the delimiter between two keys serves both."""
    first, second = "AKIAABCDEFGHIJKLMNOP", "ASIAQRSTUVWXYZ234567"
    text = f"a{glue}{first}{glue}{second}"
    spans = [(hit.start, hit.end) for hit in scan([text], ["aws_access_key_id"])]
    assert [text[start:end] for start, end in spans] == [first, second]
