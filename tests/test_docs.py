"""The README and docs/ hold together: every link lands, every log query is marked for checking.

What the marked queries and the log examples find in a real gateway's output is checked in
test_docs_match.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .support.docs import QUERIES, documented_lines, documents, fenced, prose
from .support.logs_insights import Query
from .support.servers import ROOT

pytestmark = pytest.mark.unit

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
QUERY_IN_PROSE = re.compile(r"`(?:fields|filter|stats|parse) [^`]*`")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces as -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(prose(path)):
        name, n = slug(heading), 1
        while name in found:
            name, n = f"{slug(heading)}-{n}", n + 1
        found.add(name)
    return found


def test_the_slug_is_githubs() -> None:
    assert slug("2. Create the flag and the policy chain: `policy-gateway init`") == (
        "2-create-the-flag-and-the-policy-chain-policy-gateway-init"
    )
    assert slug("Runbook: the passthrough-fallback alarm fired") == (
        "runbook-the-passthrough-fallback-alarm-fired"
    )


def test_every_relative_link_and_anchor_in_the_docs_resolves() -> None:
    broken = []
    for path in documents():
        for target in LINK.findall(prose(path)):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_every_logs_insights_query_in_the_docs_is_marked_and_within_the_subset() -> None:
    marked = [text for _, language, text in fenced() if language == QUERIES]
    assert marked, "the docs' queries are fenced as logs-insights"
    for text in marked:
        Query(text)
    unmarked = [
        where
        for where, language, text in fenced()
        if language != QUERIES and re.match(r"(fields|filter|stats|parse) ", text)
    ]
    assert unmarked == [], "fence these queries as logs-insights so a test runs them"
    for path in documents():
        assert QUERY_IN_PROSE.findall(prose(path)) == [], f"{path.name}: fence the query"


def test_the_docs_show_log_lines_and_metrics_to_check() -> None:
    shown = documented_lines()
    assert {"_aws" in line for _, line in shown} == {True, False}
