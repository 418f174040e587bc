"""The codebase's shape, as the README promises it: every module in its table, none too big."""

from __future__ import annotations

import ast
import re

from .support.servers import ROOT

PACKAGE = ROOT / "functions" / "gateway" / "policy_gateway"
LAYER = ROOT / "layers" / "policies" / "gateway_policies"
README = ROOT / "README.md"
MAX_FUNCTION_LINES = 60


def test_the_readmes_table_of_modules_is_the_package() -> None:
    rows = [
        line
        for line in README.read_text().splitlines()
        if line.startswith("| `") and line.split("|")[1].strip().endswith(".py`")
    ]
    named = {name for row in rows for name in re.findall(r"`([a-z_0-9]+\.py)`", row.split("|")[1])}
    modules = {path.name for path in PACKAGE.glob("*.py") if not path.name.startswith("__")}
    assert named >= modules, "modules missing from the README's table"
    stale = named - modules - {path.name for path in LAYER.glob("*.py")}
    assert stale == set(), "the README's table names modules that do not exist"


def test_no_function_of_the_gateway_is_longer_than_a_screen() -> None:
    long = []
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == []


def test_the_environment_is_read_in_settings_only() -> None:
    # standins.py also touches it, to point Settings at the first-run stand-ins it starts.
    readers = {
        path.name
        for path in PACKAGE.glob("*.py")
        if re.search(r"\bos\.(environ|getenv)\b", path.read_text())
    }
    assert readers <= {"settings.py", "standins.py"}
