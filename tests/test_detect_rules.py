"""The rule catalogue: each rule is valid for both engines, bounded, and finds its family.

Every pattern compiles in Python's `re` and stays in the dialect Hyperscan shares with it (no
lookaround, backreference, atomic group or possessive repeat; every repeat bounded), and its
`max_length` bounds what it can match. Then every rule runs, through a plain `re` scan, over
samples generated from each family's documented format (tests/support/secret_samples.py):
every sample found with its kind in every context an agent sends it in, no near-miss found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest
from gateway_policies.detect.rule import Rule
from gateway_policies.detect.rules import RULES, core, generic, keys, pii

from .support.rule_scan import scan
from .support.secret_samples import (
    FAMILIES,
    Sample,
    bare,
    false_positives,
    strict_formats,
    true_positives,
)
from .support.servers import ROOT

pytestmark = pytest.mark.unit

FORBIDDEN = {
    sre.ASSERT: "lookaround",
    sre.ASSERT_NOT: "lookaround",
    sre.GROUPREF: "backreference",
    sre.GROUPREF_EXISTS: "conditional backreference",
    sre.ATOMIC_GROUP: "atomic group",
    sre.POSSESSIVE_REPEAT: "possessive repeat",
}
CATEGORY_FREE = {sre.CATEGORY: "a Unicode class (\\s, \\w, \\d): spell the ASCII class out"}
WORD_BOUNDARIES = (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY)
NOT_PROVIDERS = {rule.kind for module in (generic, keys, pii) for rule in module.RULES}
# The kinds redact_secrets has always had (rules/core.py): the `kinds` option's contract.
CORE_KINDS = {rule.kind for rule in core.RULES}
PII_KINDS = {"payment_card", "iban", "us_ssn", "phone"}
MINE = [rule for rule in RULES if rule.kind not in CORE_KINDS]


def flags(rule: Rule) -> int:
    return re.IGNORECASE if rule.ignore_case else 0


def nodes(parsed: object) -> Iterator[tuple[object, object]]:
    """Every (opcode, argument) of a parsed pattern, nested ones included."""
    for op, arg in parsed:  # type: ignore[attr-defined]
        yield op, arg
        children = arg if isinstance(arg, list | tuple) else [arg]
        for child in children:
            if isinstance(child, sre_parse.SubPattern):
                yield from nodes(child)
            elif isinstance(child, list | tuple):
                for item in child:
                    if isinstance(item, sre_parse.SubPattern):
                        yield from nodes(item)


def dialect_faults(rule: Rule, forbidden: dict[object, str]) -> list[str]:
    parsed = sre_parse.parse(rule.pattern, flags(rule))
    faults = [
        name
        for op, _ in nodes(parsed)
        for key, name in forbidden.items()
        if op is key and op is not sre.AT
    ]
    for op, arg in nodes(parsed):
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and arg[1] is sre.MAXREPEAT:  # type: ignore[index]
            faults.append("unbounded repeat")
        if op is sre.AT and arg in WORD_BOUNDARIES and sre.AT in forbidden:
            faults.append(forbidden[sre.AT])
        if op is sre.IN:
            faults += [forbidden[sub] for sub, _ in arg if sub in forbidden]  # type: ignore[attr-defined]
    return faults


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.kind)
def test_each_pattern_is_in_the_shared_dialect_and_bounded(rule: Rule) -> None:
    re.compile(rule.pattern, flags(rule))
    assert dialect_faults(rule, FORBIDDEN) == []
    width = sre_parse.parse(rule.pattern, flags(rule)).getwidth()[1]
    assert width <= rule.max_length, f"{rule.kind} can match {width} > max_length {rule.max_length}"


@pytest.mark.parametrize("rule", MINE, ids=lambda r: r.kind)
def test_each_catalogue_pattern_spells_its_classes_in_ascii(rule: Rule) -> None:
    assert dialect_faults(rule, {**CATEGORY_FREE, sre.AT: "\\b or \\B"}) == []


def test_the_catalogue_covers_at_least_100_provider_families() -> None:
    providers = {rule.kind for rule in MINE} - NOT_PROVIDERS
    assert len(providers) >= 100, len(providers)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", rule.kind) for rule in RULES)


def test_keywords_are_lower_case_literals_of_every_match() -> None:
    for rule in RULES:
        assert all(k == k.lower() and k for k in rule.keywords), rule.kind
    for sample in true_positives():
        for rule in RULES:
            if rule.kind == sample.kind and rule.keywords:
                for match in re.finditer(rule.pattern, sample.text, flags(rule)):
                    assert any(k in match.group(0).lower() for k in rule.keywords), rule.kind


def test_only_the_personal_data_kinds_are_opt_in() -> None:
    assert {rule.kind for rule in RULES if not rule.default_on} == PII_KINDS & {
        rule.kind for rule in RULES
    }


def test_every_rule_has_samples() -> None:
    sampled = {sample.kind for sample in true_positives()}
    assert {rule.kind for rule in RULES} - sampled == set()


TRUE_POSITIVES = true_positives()
KINDS = {rule.kind for rule in RULES}


@pytest.mark.parametrize(
    "sample", TRUE_POSITIVES, ids=[f"{s.kind}-{s.context}" for s in TRUE_POSITIVES]
)
def test_every_sample_is_found_with_its_kind_in_every_context(sample: Sample) -> None:
    assert sample.kind in KINDS, f"{sample.kind}: no rule of the catalogue has this kind"
    found = [(s, e) for s, e, kind in scan(sample.text) if kind == sample.kind]
    for secret in sample.secrets:
        at = sample.text.index(secret)
        while at != -1:
            assert any(s <= at and at + len(secret) <= e for s, e in found), (secret, found)
            at = sample.text.find(secret, at + 1)


BARE = [sample for value in strict_formats() for sample in bare(value)]


@pytest.mark.parametrize("sample", BARE, ids=[f"{s.kind}-{s.context}" for s in BARE])
def test_every_strict_format_is_found_with_no_label(sample: Sample) -> None:
    """In a log line, a URL, a JSON value whose key names nothing and a YAML list item."""
    test_every_sample_is_found_with_its_kind_in_every_context(sample)


def test_every_strict_format_family_is_tried_with_no_label_in_four_contexts() -> None:
    contexts: dict[str, set[str]] = {}
    for sample in BARE:
        contexts.setdefault(sample.kind, set()).add(sample.context)
    prefixed = {family.kind for family in FAMILIES if not family.labelled}
    assert prefixed <= set(contexts)
    assert all(len(found) >= 4 for found in contexts.values())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_other_draws_of_every_format_are_found_too(seed: int) -> None:
    missed = [
        (sample.kind, sample.context)
        for sample in true_positives(seed + 100)
        if not any(kind == sample.kind for _, _, kind in scan(sample.text))
    ]
    assert missed == []


def test_no_near_miss_is_found() -> None:
    # A core kind keeps its old, looser meaning (any length of `sk-ant-…`, say): its
    # family's shortened or wrong-checksum draws are not near misses for it.
    hits = [(text[:80], scan(text)) for text in false_positives(skip=CORE_KINDS)]
    assert [hit for hit in hits if hit[1]] == []


def test_the_policies_doc_states_the_catalogue_s_size() -> None:
    text = (ROOT / "docs" / "policies.md").read_text()
    # A kind may take more than one rule (a Kubernetes Secret in either key order).
    assert f"{len({rule.kind for rule in RULES})} kinds: the seven above" in text


def test_the_policies_doc_says_which_families_need_a_label() -> None:
    """Its catalogue table's `needs a label` column says `no` exactly for the families tested
    above with none (documents and personal data say how they are found instead)."""
    text = (ROOT / "docs" / "policies.md").read_text()
    header = "| kind | provider | found by (keyword) | validator | needs a label | default |\n"
    rows = text.split(header, 1)[1].split("\n\n", 1)[0].split("\n")[1:]
    label = {row.split(" | ")[0][3:-1]: row.split(" | ")[4] for row in rows}
    assert set(label) == KINDS - CORE_KINDS
    strict = {value.kind for value in strict_formats()}
    assert {kind for kind, says in label.items() if says == "no"} == strict - CORE_KINDS
