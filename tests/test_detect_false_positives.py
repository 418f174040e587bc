"""False positives on named clean corpora stay at or under one per 10 MB.

A fixed, seeded few MB of each corpus (tests/support/clean_corpora.py) go through every rule,
opt-in personal data included; `python -m bench.false_positives` measures the whole standard
library and 10 MB of each other corpus. An `email` is a real address wherever it is found, so
it is not counted.
"""

from __future__ import annotations

import pytest

from .support.clean_corpora import CORPORA
from .support.rule_scan import prefiltered

pytestmark = pytest.mark.unit

TEN_MB = 10 * 1024 * 1024
SAMPLE = {"stdlib": 2_000_000, "git_hashes": 400_000, "uuids": 400_000, "base64_images": 400_000}


@pytest.mark.parametrize("corpus", SAMPLE)
def test_at_most_one_false_positive_per_10_mb(corpus: str) -> None:
    texts = CORPORA[corpus](SAMPLE[corpus], 7)
    size = sum(len(text) for text in texts)
    found = [
        (kind, text[start:end])
        for text in texts
        for start, end, kind in prefiltered(text)
        if kind != "email"
    ]
    assert len(found) * TEN_MB / size <= 1, found
