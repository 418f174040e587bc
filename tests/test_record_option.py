"""The document's `record` option (records/option.py) and the store format's digests."""

from __future__ import annotations

import pytest
from gateway_policies import PolicyConfigError, load_document
from policy_gateway.records import layout, option

pytestmark = pytest.mark.unit

DOCUMENT = {
    "policies": [],
    "record": {"enabled": True},
    "callers": {
        "bob": {"policies": [], "record": {"enabled": False}},
        "group:contractors": {"policies": [], "record": {"enabled": False}},
        "carol": {"policies": []},
    },
}


def test_the_option_resolves_as_the_chains_do() -> None:
    load_document(DOCUMENT)  # the loader takes `record` beside a caller's policies
    parsed = option.parse(DOCUMENT, store_configured=True)
    assert parsed.enabled("alice")
    assert not parsed.enabled("bob")
    assert not parsed.enabled("erin", ["contractors"])
    assert not parsed.enabled("bob", ["others"])
    assert parsed.enabled("carol", ["contractors"]) is False  # her entry says nothing
    assert parsed.enabled(None)
    assert not option.parse({"policies": []}, store_configured=False).anyone


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"enabled": "yes"}, "must be true or false"),
        ({"enabled": True, "extra": 1}, "must be an object"),
        (True, "must be an object"),
    ],
)
def test_a_malformed_option_is_refused(value: object, message: str) -> None:
    with pytest.raises(PolicyConfigError, match=message):
        option.parse({"policies": [], "record": value}, store_configured=True)


def test_recording_without_a_store_is_refused() -> None:
    with pytest.raises(PolicyConfigError, match="RECORDS_BUCKET"):
        option.parse(DOCUMENT, store_configured=False)


def test_a_call_extends_the_prefix_its_parent_sent() -> None:
    first = ['{"role":"user","content":"a"}']
    answer = '{"role":"assistant","content":"b"}'
    second = [*first, answer, '{"role":"user","content":"c"}']
    assert layout.resumes_at(first) == 0
    assert layout.resumes_at(second) == 1
    assert layout.prefix_digests(second)[1] == layout.prefix_digests(first)[-1]
    assert layout.prefix_digests([]) == [layout.ROOT_DIGEST]
    assert layout.caller_prefix("arn:aws:iam::1:role/x") == "arn:aws:iam::1:role%2Fx"
