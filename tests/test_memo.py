"""The detector's memo (gateway_policies/detect/memo.py) on its own: the digest keeps
texts apart whatever their encoding, and the tables stay within their bytes, least
recently used partition first, under threads too."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import pytest
from gateway_policies.detect.memo import (
    _SEED,
    TABLE_BYTES,
    Entry,
    Memo,
    digest,
    size,
    table_size,
)
from xxhash import xxh3_128_digest

pytestmark = pytest.mark.unit

TAIL = "x" * 80


def clean(_: str) -> Entry:
    return (), {}, ""


def found(text: str) -> Entry:
    return ((0, 1, "k"),), {"k": 1}, "[REDACTED:k]" + text[1:]


def counting(scan: Callable[[str], Entry]) -> tuple[list[str], Callable[[str], Entry]]:
    scanned: list[str] = []

    def counted(text: str) -> Entry:
        scanned.append(text)
        return scan(text)

    return scanned, counted


def test_each_encoding_has_digests_of_its_own() -> None:
    """A Latin-1 text, a wide one and one with surrogates whose encodings are the same
    bytes: the tags keep their digests apart."""
    narrow = "\xe9" + TAIL + "\xff"
    wide = narrow.encode("latin-1").decode("utf-16-le")
    assert any(ord(c) > 255 for c in wide)
    surrogates = "\ud800" + TAIL
    narrow_twin = surrogates.encode("utf-8", "surrogatepass").decode("latin-1")
    for one, other, encoding in (
        (narrow, wide, "utf-16-le"),
        (narrow_twin, surrogates, "utf-8"),
    ):
        assert one.encode("latin-1") == other.encode(encoding, "surrogatepass")
        assert xxh3_128_digest(one.encode("latin-1"), _SEED) in digest(other)
        assert digest(one) != digest(other)
    assert len({digest(text) for text in (narrow, wide, surrogates, narrow_twin)}) == 4


def test_a_pair_of_surrogates_is_not_the_character_it_pairs_to() -> None:
    paired = "\U0001f600" + TAIL
    apart = "\ud83d\ude00" + TAIL
    assert paired.encode("utf-16-le", "surrogatepass") == apart.encode("utf-16-le", "surrogatepass")
    assert digest(paired) != digest(apart)
    assert digest(apart) == digest("\ud83d\ude00" + TAIL)
    assert digest(apart) != digest("\ud83d\ude01" + TAIL)


def test_ascii_latin1_and_wide_texts_digest_as_their_characters() -> None:
    for text in ("plain " + TAIL, "caf\xe9 " + TAIL, "\u2014 " + TAIL):
        assert digest(text) == digest("".join(list(text)))
        assert digest(text) != digest(text + " ")


def test_a_batch_scans_each_new_text_once_per_partition_and_caller() -> None:
    memo = Memo(1 << 20)
    long_text = "secret " + TAIL
    scanned, scan = counting(found)
    texts = [long_text, "short", long_text, "short"]
    assert memo.remember_all("p", "alice", texts, scan) == [found(t) for t in texts]
    assert scanned == [long_text, "short"]
    memo.remember_all("p", "alice", texts, scan)
    assert scanned == [long_text, "short"]
    memo.remember_all("p", "bob", texts, scan)
    memo.remember_all("q", "alice", texts, scan)
    assert len(scanned) == 6
    assert len(memo) == 6


def test_a_short_clean_text_is_its_own_key_and_no_other_text_is_kept() -> None:
    memo = Memo(1 << 20)
    texts = ["short", "short secret", "long " + TAIL]
    memo.remember_all("p", None, texts, lambda t: found(t) if "secret" in t else clean(t))
    keys = [key for table in memo._tables.values() for key in table]
    assert keys[0] == "short"
    assert all(isinstance(key, bytes) for key in keys[1:])


def test_the_least_recently_used_partition_goes_first_oldest_entry_first() -> None:
    one = size(digest("a" + TAIL), clean(""))
    memo = Memo(table_size(("p", "alice")) + table_size(("p", "bob")) + 4 * one)
    memo.remember_all("p", "alice", ["a1" + TAIL, "a2" + TAIL], clean)
    memo.remember_all("p", "bob", ["b1" + TAIL, "b2" + TAIL], clean)
    memo.remember_all("p", "alice", ["a1" + TAIL], clean)  # alice is now the most recent
    memo.remember_all("p", "alice", ["a3" + TAIL], clean)
    scanned, scan = counting(clean)
    memo.remember_all("p", "bob", ["b1" + TAIL, "b2" + TAIL], scan)
    assert scanned == ["b1" + TAIL]  # bob's oldest went; alice kept all three
    assert memo.bytes <= memo.max_bytes
    memo.remember_all("p", "alice", ["a1" + TAIL, "a2" + TAIL, "a3" + TAIL], scan)
    assert scanned == ["b1" + TAIL, "a1" + TAIL]


def test_tables_count_in_the_bytes_and_empty_ones_go() -> None:
    memo = Memo(10 * table_size(("p", "caller100")))
    for index in range(10, 110):
        memo.remember_all("p", f"caller{index}", [], clean)
        assert memo.bytes <= memo.max_bytes
    assert len(memo._tables) == 10
    memo.resize(0)
    assert (memo.bytes, len(memo), len(memo._tables)) == (0, 0, 0)


def test_an_entry_larger_than_the_memo_is_not_kept() -> None:
    memo = Memo(table_size(("p", None)) + 100)
    scanned, scan = counting(found)
    for _ in range(2):
        assert memo.remember_all("p", None, ["x " + TAIL], scan) == [found("x " + TAIL)]
    assert len(scanned) == 2
    assert len(memo) == 0


def test_threads_sharing_a_small_memo_keep_its_bytes_exact() -> None:
    memo = Memo(20 * TABLE_BYTES)
    errors: list[BaseException] = []

    def work(caller: str) -> None:
        try:
            for round_ in range(200):
                texts = [f"{caller} {round_ % 7} {index} {TAIL}" for index in range(5)]
                entries = memo.remember_all("p", caller, texts, found)
                assert entries == [found(t) for t in texts]
        except BaseException as error:  # handed to the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(f"c{n}",)) for n in range(6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between almost any two steps
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors
    kept = [(key, *value) for table in memo._tables.values() for key, value in table.items()]
    assert all(cost == size(key, entry) for key, entry, cost in kept)
    tables = sum(table_size(where) for where in memo._tables)
    assert memo.bytes == sum(cost for _, _, cost in kept) + tables
    assert memo.bytes <= memo.max_bytes
