"""The memo's bound is its memory: what tracemalloc sees it hold stays within 1.25x of
POLICY_MEMO_BYTES, however many callers and texts, and its own count is no gross
overestimate either (a bound counted twice over would waste the memo).

Each shape is one a gateway meets: one long session of clean texts; a partition per
call (every call with an API key of its own); texts with secrets, whose entries keep
the text as redacted, in ASCII and not; short texts that are their own keys. The texts
and callers are made inside the measurement, as requests make them, serialized as the
gateway writes a request for the upstream (orjson, which leaves a string that is not
ASCII holding its UTF-8 form too), and dropped by the caller, so what remains is what the
memo keeps alive.
"""

from __future__ import annotations

import gc
import random
import string
import tracemalloc
from collections import Counter
from collections.abc import Callable
from types import MappingProxyType

import orjson
import pytest
from gateway_policies.detect.memo import Entry, Memo

pytestmark = pytest.mark.unit

BOUND = 1024 * 1024
NOTHING: MappingProxyType[str, int] = MappingProxyType({})


def clean(_: str) -> Entry:
    return (), NOTHING, ""


def with_secrets(count: int) -> Callable[[str], Entry]:
    def scan(text: str) -> Entry:
        found = tuple((300 + 60 * i, 340 + 60 * i, f"kind{i % 3}") for i in range(count))
        counts = MappingProxyType(Counter(kind for _, _, kind in found))
        return found, counts, text[:300] + "[REDACTED:kind0]" + text[340:]

    return scan


ASCII = string.ascii_letters
NOT_ASCII = string.ascii_letters + "éü€"

SHAPES: dict[str, tuple[int, int, int, str, Callable[[str], Entry]]] = {
    # name: (calls, texts per call, characters per text, their letters, scan)
    "one session, clean texts": (1, 12_000, 100, ASCII, clean),
    "a partition per call": (4_000, 1, 100, ASCII, clean),
    "five texts per call": (2_000, 5, 100, ASCII, clean),
    "texts with a secret": (400, 3, 2_000, ASCII, with_secrets(1)),
    "texts with a secret, not ASCII": (400, 3, 2_000, NOT_ASCII, with_secrets(1)),
    "texts with many secrets": (1, 600, 2_000, ASCII, with_secrets(12)),
    "short texts": (600, 20, 48, ASCII, clean),
    "short texts, not ASCII": (600, 20, 48, NOT_ASCII, clean),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_what_the_memo_holds_is_within_its_bound(shape: str) -> None:
    calls, per_call, length, letters, scan = SHAPES[shape]
    rng = random.Random(shape)
    memo = Memo(BOUND)
    # orjson's first call sets up what it keeps for the process: not the memo's.
    orjson.dumps(["é", {"a": 1}])
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(calls):
            caller = "key:" + format(rng.getrandbits(64), "016x")
            texts = ["".join(rng.choices(letters, k=length)) for _ in range(per_call)]
            entries = memo.remember_all("instance", caller, texts, scan)
            sent = zip(texts, entries, strict=True)
            orjson.dumps([new if found else old for old, (found, _, new) in sent])
            del texts, entries, sent, caller
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert memo.bytes <= BOUND
    assert held <= 1.25 * BOUND, f"{shape}: holds {held} bytes for a bound of {BOUND}"
    assert held >= 0.6 * memo.bytes, f"{shape}: counts {memo.bytes} bytes, holds {held}"
