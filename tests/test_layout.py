"""The codebase's shape, as docs/architecture.md draws it: its trees, no module too big."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .support.servers import ROOT

pytestmark = pytest.mark.unit

PACKAGE = ROOT / "functions" / "gateway" / "policy_gateway"
LAYER = ROOT / "layers" / "policies" / "gateway_policies"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TESTS = ROOT / "tests"
MAX_FUNCTION_LINES = 60


def drawn_tree(root: str) -> set[str]:
    """The files and folders the architecture doc's tree under `root` names, as paths inside it."""
    text = ARCHITECTURE.read_text()
    block = text[text.index(f"```\n{root}\n") :].split("```")[1]
    parents: list[str] = []
    named = set()
    for line in block.splitlines()[2:]:
        entry = re.match(r"([│ ]*[├└]── )(\S.*?)(?:\s{2,}|$)", line)
        assert entry, f"not a tree line: {line!r}"
        depth = len(entry[1]) // 4 - 1
        del parents[depth:]
        names = [name.strip() for name in entry[2].split(",")]
        for name in names:
            named.add("/".join([*parents, name.rstrip("/")]))
        if names[-1].endswith("/"):
            parents.append(names[-1].rstrip("/"))
    return named


def package_tree(package: Path, summarized: tuple[str, ...] = ()) -> set[str]:
    """The package's modules and folders; a `summarized` folder's modules, which the
    architecture doc names in prose (the built-in policies), are left out."""
    files = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if not path.name.startswith("__") and path.parent.name not in summarized
    }
    folders = {
        path.parent.relative_to(package).as_posix()
        for path in package.rglob("__init__.py")
        if path.parent != package
    }
    return files | folders


def test_the_drawn_trees_are_the_packages() -> None:
    assert drawn_tree("functions/gateway/policy_gateway/") == package_tree(PACKAGE)
    assert drawn_tree("layers/policies/gateway_policies/") == package_tree(LAYER, ("builtin",))


def test_the_tree_check_reads_nested_folders() -> None:
    tree = drawn_tree("functions/gateway/policy_gateway/")
    assert {"upstream", "upstream/bedrock", "upstream/bedrock/eventstream.py"} <= tree
    assert {"app.py", "surface.py", "cli/doctor/values.py"} <= tree


def test_no_function_of_the_gateway_is_longer_than_a_screen() -> None:
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({lines} lines)")
    assert long == []


def test_the_environment_is_read_in_settings_only() -> None:
    # local/standins.py also touches it, to point Settings at the first-run stand-ins it starts.
    readers = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search(r"\bos\.(environ|getenv)\b", path.read_text())
    }
    assert "settings.py" in readers
    assert readers <= {"settings.py", "observability/tracing_settings.py", "local/standins.py"}


def test_unit_tests_import_nothing_that_serves() -> None:
    """The unit tier (docs/architecture.md, "Tests") needs no moto, server or gateway process."""
    serving = ("moto", "boto3", "tests.support.servers", "tests.support.aws", "uvicorn")
    offending = []
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        if "pytest.mark.unit" not in ast.unparse(tree):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if [alias.name for alias in node.names] == ["ROOT"]:
                    continue  # the checkout's path, nothing that serves
                names = [f"tests.{node.module}" if node.level else node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offending += [f"{path.name}: {name}" for name in names if name.startswith(serving)]
    assert offending == []


def _test_modules_imported(tree: ast.AST) -> list[str]:
    """The test modules (`test_*`) an import statement of `tree` names, relative or absolute."""
    named = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] if base else [alias.name for alias in node.names]
            named += [name for name in names if name.rpartition(".")[2].startswith("test_")]
        elif isinstance(node, ast.Import):
            named += [a.name for a in node.names if a.name.rpartition(".")[2].startswith("test_")]
    return named


def test_no_test_file_imports_another() -> None:
    """docs/architecture.md ("Tests"): what two test files share lives in tests/support/."""
    importing = [
        f"{path.name}: {name}"
        for path in sorted(TESTS.glob("test_*.py"))
        for name in _test_modules_imported(ast.parse(path.read_text()))
    ]
    assert importing == []


def test_the_test_import_check_sees_every_spelling() -> None:
    source = (
        "from .test_budget import call\n"
        "from . import test_shadow\n"
        "from tests.test_auth import KEY\n"
        "import tests.test_flag\n"
        "from .support.sdk import REPLACE\n"
        "from .conftest import KEYS_SECRET\n"
    )
    assert _test_modules_imported(ast.parse(source)) == [
        "test_budget",
        "test_shadow",
        "tests.test_auth",
        "tests.test_flag",
    ]
