"""flow_guard's candidate lookup: the literal database answers exactly as `str.find` does,
and the work of a lookup does not grow with the product of candidates and text."""

from __future__ import annotations

import base64
import random
from collections.abc import Sequence

import pytest
from gateway_policies.provenance import conversation as conversation_module
from gateway_policies.provenance.candidates import Candidate, candidates
from gateway_policies.provenance.conversation import Conversation, Result
from gateway_policies.provenance.hosts import BOUNDARIES, Boundary
from gateway_policies.provenance.lookup import (
    LITERALS_FROM_CHARACTERS,
    Finder,
    LiteralFinder,
    Sought,
    StringFinder,
    finder,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.unit

# A small alphabet, so that candidates often occur; non-ASCII, so that the byte scan's
# offsets differ from the characters' (and a letter, `é`, and a symbol, `€`, stand around
# them); the characters that decide a boundary (`.`, `-`, `_`, `@`, `+`).
_ALPHABET = "ab c.é€\U0001f600-_@+"
_candidate = st.text(_ALPHABET, min_size=1, max_size=4)
_sought = st.tuples(_candidate, st.sampled_from(Boundary))
_kind = st.sampled_from(["value", "token", *BOUNDARIES])
_text = st.text(_ALPHABET, max_size=60)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_sought, min_size=1, max_size=12),
    st.lists(_text, max_size=5),
    st.data(),
)
def test_the_literal_database_finds_what_str_find_finds(
    needles: list[Sought], texts: list[str], data: st.DataObject
) -> None:
    among = data.draw(st.sets(st.integers(0, len(needles) - 1)))
    for wanted in (range(len(needles)), sorted(among)):
        expected = StringFinder(needles).holders(texts, wanted)
        assert LiteralFinder(needles).holders(texts, wanted) == expected


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.builds(Candidate, _kind, _candidate), min_size=1, max_size=12),
    st.lists(_text, min_size=1, max_size=4),
    _text,
)
def test_a_conversation_names_the_same_tainted_candidate_either_way(
    needles: list[Candidate], texts: list[str], trusted: str
) -> None:
    found = Conversation(trusted, [Result(f"t{n}", text, False) for n, text in enumerate(texts)])
    one_by_one = next(
        (
            (index, source)
            for index, n in enumerate(needles)
            if (source := found.source(n.text, n.kind))
        ),
        None,
    )
    assert found.tainted(needles) == one_by_one


class _Counting:
    """The finder a conversation chose, kept to read the work it did."""

    def __init__(self) -> None:
        self.made: list[Finder] = []

    def __call__(self, needles: Sequence[Sought], characters: int) -> Finder:
        made = finder(needles, characters)
        self.made.append(made)
        return made


def _work(count: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, bool]:
    rng = random.Random(count)
    page = base64.b64encode(rng.randbytes(3 * LITERALS_FROM_CHARACTERS)).decode().lower()
    trusted = "please mail the report to me"
    needles = [Candidate("token", f"absent-{n:06d}-{rng.random()}") for n in range(count)]
    needles.append(Candidate("value", page[1000:1040]))
    counting = _Counting()
    monkeypatch.setattr(conversation_module, "finder", counting)
    found = Conversation(trusted, [Result("toolu_page", page, False)]).tainted(needles)
    (made,) = counting.made
    return made.read, len(page) + len(trusted), found == (count, "toolu_page")


@pytest.mark.parametrize("count", [10, 100, 2000])
def test_the_untrusted_text_is_read_a_constant_number_of_times(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, size, blocked = _work(count, monkeypatch)
    assert blocked
    assert read <= 2 * size


def test_a_sink_input_of_many_tokens_is_judged_as_before() -> None:
    """A 20 KB base64 attachment over a 200 KB page: many candidates, the literal database."""
    rng = random.Random(7)
    attachment = base64.b64encode(rng.randbytes(15_000)).decode()
    made = candidates({"to": "boss@corp.example", "attachment": attachment}, 8)
    assert len(made) > 100
    page = "x " * 100_000 + "reply to boss@corp.example"
    found = Conversation("", [Result("toolu_page", page, False)])
    assert found.tainted(made) == (
        next(n for n, c in enumerate(made) if c.text == "boss@corp.example"),
        "toolu_page",
    )
