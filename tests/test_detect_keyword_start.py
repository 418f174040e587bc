"""A rule whose match starts at its keyword (`Rule.lead`) is confirmed from there, not over its
whole reach before each keyword.

A Docker config's `"auth"` value runs to thousands of characters (an ECR login), so its rule is
found by its keyword; JSON full of `"author"` keys then holds that keyword everywhere. Confirmed
over its reach before each one, the text would count as dense and be redacted whole; confirmed
from each keyword on, nothing is found in it, and a real `"auth"` among them still is.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest
from gateway_policies.detect import catalogue
from gateway_policies.detect.engine import HyperscanEngine
from gateway_policies.detect.reference import ReferenceEngine
from gateway_policies.detect.ruleset import RuleSet

pytestmark = pytest.mark.unit

RULES = RuleSet(catalogue())
ENGINE = HyperscanEngine(RULES)
AUTHORS = [{"author": f"person {i}", "title": "x" * 3000} for i in range(120)]
ECR = base64.b64encode(b"AWS:" + base64.b64encode(b"Q7pZ" * 600)).decode()


def kinds(text: str) -> list[tuple[str, tuple[int, int]]]:
    return [(RULES.rules[index].kind, span) for index, span in ENGINE.find(text)]


def test_rules_with_a_lead_are_found_by_their_keywords() -> None:
    led = [rule for rule in RULES.rules if rule.lead is not None]
    assert {rule.kind for rule in led} >= {
        "docker_config_auth",
        "base64_private_key",
        "cli_password_short_flag",
    }
    assert all(rule.keywords for rule in led)
    # Found by keywords whatever their reach: none is compiled as its own pattern.
    by_pattern = {index for index in range(len(RULES.rules)) if index in ENGINE._reversible}
    assert not any(RULES.rules[index].lead is not None for index in by_pattern)


def test_a_keyword_everywhere_is_no_dense_text() -> None:
    text = json.dumps(AUTHORS)
    assert kinds(text) == []
    without = RuleSet(tuple(replace(rule, lead=None) for rule in RULES.rules))
    # What the lead saves: over its whole reach, the same text counts as dense.
    assert [span for _, span in HyperscanEngine(without).find(text)] == [(0, len(text))]


def test_a_long_auth_among_them_is_found_exactly() -> None:
    text = json.dumps([*AUTHORS[:60], {"auths": {"ecr": {"auth": ECR}}}, *AUTHORS[60:]])
    start = text.index(ECR)
    assert kinds(text) == [("docker_config_auth", (start, start + len(ECR)))]
    assert sorted(ENGINE.find(text)) == sorted(ReferenceEngine(RULES).find(text))


def test_keywords_in_any_case_and_near_matches_find_what_re_finds() -> None:
    """Hyperscan reports keywords in any case; `re` tries a match only from each of them."""
    key = base64.b64encode(b"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI" + b"Q7pZ" * 40).decode()
    config = base64.b64encode(json.dumps({"auths": {"r": {"auth": "Ym9iOlE3cFo4cTJ4"}}}).encode())
    pieces = [key, config.decode(), key.lower(), key.upper(), key[:20], '"AUTH": "x"', ECR[:30]]
    text = "\n".join(piece + " " + piece for piece in pieces)
    assert sorted(ENGINE.find(text)) == sorted(ReferenceEngine(RULES).find(text))
    assert {kind for kind, _ in kinds(text)} >= {"base64_private_key", "docker_config_base64"}


def test_rules_that_share_a_head_find_what_re_finds() -> None:
    """The short-option rules (one per way a value is written) share one search for where
    their command and option begin; each rule is tried only there, and a run of keywords
    closer together than the lead (one span wider than a window) is searched to its end."""
    short = [n for n, rule in enumerate(RULES.rules) if rule.kind == "cli_password_short_flag"]
    assert len({id(ENGINE._heads[n][0]) for n in short}) == 1
    lines = [
        "mysql -uroot -pS3cr3tPassw0rd db",
        "mysql -uroot -p'S3cr3t Passw0rd' db",
        'mysql -uroot -p"S3cr3t Passw0rd" db',
        "helm registry login  reg.example -u bob -p 'Hunter22Hunter' && echo",
        "docker login " * 12 + "registry -u bob -p Hunter22Hunter2",
        "MYSQL mariadb login mongo sshpass redis-cli " * 30,
        '["mysql", "-uroot", "-pS3cr3tPassw0rd"]',
    ]
    text = "\n".join(lines)
    found = sorted(ENGINE.find(text))
    assert found == sorted(ReferenceEngine(RULES).find(text))
    assert sum(RULES.rules[index].kind == "cli_password_short_flag" for index, _ in found) >= 6
