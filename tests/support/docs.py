"""The README and docs/ as the tests read them: their fenced blocks, queries and log examples."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .servers import ROOT

FENCE = re.compile(r"^[ \t]*```(\S*)\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
QUERIES = "logs-insights"
"""The fence language every CloudWatch Logs Insights query in the docs is marked with."""


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fenced(language: str | None = None) -> Iterator[tuple[str, str, str]]:
    """(where, language, text) of every fenced block in the README and docs/, or of those in
    `language`; an indented block (in a list item) dedented."""
    for path in documents():
        text = path.read_text()
        for block in FENCE.finditer(text):
            if language in (None, block[1]):
                line = text.count("\n", 0, block.start()) + 1
                yield f"{path.relative_to(ROOT)}:{line}", block[1], textwrap.dedent(block[2])


def prose(path: Path) -> str:
    """A document without its fenced blocks."""
    return FENCE.sub("", path.read_text())


def documented_lines() -> list[tuple[str, dict[str, Any]]]:
    """The log lines and EMF documents the docs' JSON blocks show, one per line."""
    shown = []
    for where, _, block in fenced("json"):
        for line in block.splitlines():
            value = json.loads(line) if line.startswith("{") and line.endswith("}") else None
            if isinstance(value, dict) and ("_aws" in value or "level" in value):
                shown.append((where, value))
    return shown


def section(document: str, heading: str) -> str:
    """The text of `document` (a path from the checkout's root) under `heading` (a whole
    heading line) up to the next heading of any level, fenced blocks included (a `# comment`
    in one is no heading)."""
    lines = (ROOT / document).read_text().splitlines(keepends=True)
    start = lines.index(f"{heading}\n")
    kept, fenced = [lines[start]], False
    for line in lines[start + 1 :]:
        fenced ^= line.lstrip().startswith("```")
        if not fenced and re.match(r"#{1,6} ", line):
            break
        kept.append(line)
    return "".join(kept)
