"""False positives of the detector's rules on named clean corpora, per 10 MB.

    python -m bench.false_positives [--mb N]

Runs every rule (a plain `re` scan, each text with the rules whose keywords it holds) over the
corpora of tests/support/clean_corpora.py: the whole standard library outside its tests (or
N MB of it), and N MB each of git hashes, UUIDs and base64 image data. Prints each corpus's
size, its findings by kind, default-on rules and opt-in personal data apart. An `email` in the
standard library is a real address, not a false positive: it is listed, not counted.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from gateway_policies.detect.rules import RULES

from tests.support.clean_corpora import CORPORA, stdlib_files
from tests.support.rule_scan import prefiltered

TEN_MB = 10 * 1024 * 1024
NOT_FALSE = {"email"}


def measure(texts: list[str]) -> tuple[int, Counter[str], list[str]]:
    size = sum(len(t) for t in texts)
    kinds: Counter[str] = Counter()
    shown: list[str] = []
    for text in texts:
        for start, end, kind in prefiltered(text):
            kinds[kind] += 1
            if kind not in NOT_FALSE and len(shown) < 20:
                shown.append(f"{kind}: {text[max(0, start - 30) : end + 10]!r}")
    return size, kinds, shown


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=10.0, help="MB of each synthetic corpus")
    args = parser.parse_args(argv)
    size = int(args.mb * 1024 * 1024)
    opt_in = {r.kind for r in RULES if not r.default_on}
    whole_stdlib = sum(p.stat().st_size for p in stdlib_files())
    for name, corpus in CORPORA.items():
        texts = corpus(whole_stdlib if name == "stdlib" else size, 0)
        chars, kinds, shown = measure(texts)
        default = sum(n for k, n in kinds.items() if k not in opt_in | NOT_FALSE)
        personal = sum(n for k, n in kinds.items() if k in opt_in)
        print(
            f"{name}: {chars / 1e6:.1f} MB; default-on rules {default} "
            f"({default * TEN_MB / chars:.2f} per 10 MB); opt-in PII {personal} "
            f"({personal * TEN_MB / chars:.2f} per 10 MB); by kind {dict(kinds)}"
        )
        for line in shown:
            print("   ", line)


if __name__ == "__main__":
    main(sys.argv[1:])
