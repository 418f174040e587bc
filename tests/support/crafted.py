"""Crafted bodies of partial matches around real ones, for every family of the catalogue.

A real match every ~800 characters, and between them runs that each rule's `re` begins to
match and then fails: the issue-40 shape `a…a@b-b-b-` for the e-mail rule, and for every family
its own sample (tests/support/secret_samples.py) cut short, each run of letters and digits in
it stretched to a rule's bound, so a backtracking confirmation walks each run again from every
start. Spread over many text blocks, since one text's confirmation is bounded on its own
(detect.engine.CONFIRM_CHARACTERS).
"""

from __future__ import annotations

import re

from .secret_samples import placed, values

UNIT_CHARACTERS = 800
"""About how far apart the real matches are."""
RUN = 60
"""How long each stretched run of a partial match is: past most of a rule's inner bounds."""
BLOCK_CHARACTERS = 64 * 1024
"""The size of each text block a crafted body is sent as."""

EMAIL_PARTIAL = "a" * RUN + "@" + "b-" * (RUN // 2)
"""Issue 40's shape: a local part, then labels that never reach a dot and a top-level domain."""
EMAIL_REAL = "jane.doe@example.com"

_RUNS = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")


def _stretched(run: str) -> str:
    return (run * (RUN // len(run) + 1))[:RUN] if run[0].isalnum() else run


def partials(value: str) -> list[str]:
    """`value` cut before each of its last three runs, every run of letters and digits before
    the cut stretched to RUN characters."""
    runs = _RUNS.findall(value)
    return ["".join(_stretched(run) for run in runs[:cut]) for cut in range(1, len(runs))][-3:]


def unit(partial: str, real: str) -> str:
    """Partial matches for about UNIT_CHARACTERS, then one real match."""
    run = ""
    while len(run) < UNIT_CHARACTERS:
        run += partial + "\n"
    return f"{run}{real}\n"


def around_units() -> dict[str, str]:
    """One unit per kind of the catalogue that has a sample, the e-mail one in issue 40's shape."""
    units = {"email": unit(" ".join([EMAIL_PARTIAL] * 3), f"mail {EMAIL_REAL} now")}
    for value in values():
        if value.kind in units:
            continue
        real = value.value if value.document else placed(value)[0].text
        units[value.kind] = unit(" ".join(partials(value.value)), real)
    return units


def repeated(text: str, size: int) -> str:
    return (text * (size // len(text) + 1))[:size]


def blocks(unit: str, size: int) -> list[str]:
    """About `size` characters of `unit` repeated, as text blocks of whole units (a real match
    is never cut in two) of about BLOCK_CHARACTERS, each its own text (a memo of scans finds
    none of them scanned already)."""
    block = unit * max(1, BLOCK_CHARACTERS // len(unit) - 1)
    return [f"part {n}\n{block}" for n in range(max(1, size // len(block)))]
