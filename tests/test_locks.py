"""The locks are generated from pyproject.toml, and a stale lock is caught.

release/locks.py is loaded from its path (it is a script, run before the
virtualenv exists). The end-to-end check runs the script on a copy of the repo's
pyproject.toml and locks, as `make test` does.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "release" / "locks.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release_locks", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


locks = _load()


def _pins(path: Path) -> dict[str, str]:
    text = path.read_text()
    return {
        name.lower(): version
        for name, version in re.findall(
            r"^([A-Za-z0-9][\w.-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", text, re.M
        )
    }


def test_every_lock_is_up_to_date_with_pyproject() -> None:
    assert locks.stale_locks() == []


def test_every_pin_is_hashed_and_every_direct_requirement_pinned() -> None:
    for lock in locks.all_locks():
        text = lock.path.read_text()
        blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 3)[3])
        for block in blocks:
            if block.strip() and not block.startswith("#"):
                assert "--hash=sha256:" in block, f"{lock.name}: {block.splitlines()[0]}"
        pins = _pins(lock.path)
        for requirement in locks.requirements(lock.group):
            name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower()
            assert name.replace("_", "-") in {p.replace("_", "-") for p in pins}, (
                f"{name} not pinned in {lock.name}"
            )


def test_shared_packages_have_one_version_across_the_sets() -> None:
    dev = _pins(locks.LOCKS / "dev.txt")
    # What the tests import, what ships and what serves locally: every lock made under the dev pins.
    shipped = [lock for lock in locks.all_locks() if "dev" in lock.constraints]
    assert {lock.group for lock in shipped} == {"function", "layer", "breaker", "serve"}
    for lock in shipped:
        for name, version in _pins(lock.path).items():
            if name in dev:
                assert dev[name] == version, f"{name}: {lock.name} {version}, dev {dev[name]}"


def test_requests_accepts_the_locked_urllib3_and_charset_detectors() -> None:
    """requests warns (RequestsDependencyWarning, on every `sam` command) when the urllib3
    or chardet a lock pins is outside the range it was released against."""
    # Untyped (no stubs in the dev set): its check, as it runs at import.
    check = importlib.import_module("requests").check_compatibility
    for name in ("dev", "serve"):
        pins = _pins(locks.LOCKS / f"{name}.txt")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check(pins["urllib3"], pins.get("chardet"), pins.get("charset-normalizer"))


def test_the_scanner_has_a_lock_and_a_virtualenv_of_its_own() -> None:
    """checkov pins cyclonedx-python-lib below what cyclonedx-bom (dev) needs."""
    (scan,) = [lock for lock in locks.all_locks() if lock.name == "scan"]
    assert scan.constraints == ()
    assert (scan.python, scan.platform) == (locks.DEV_PYTHON, locks.DEV_PLATFORM)
    assert [r.split(">")[0] for r in locks.requirements("scan")] == ["checkov"]
    scan_pins = _pins(scan.path)
    assert "checkov" in scan_pins
    assert "checkov" not in _pins(locks.LOCKS / "dev.txt")
    assert "starlette" not in scan_pins
    makefile = (ROOT / "Makefile").read_text()
    assert "SCAN_LOCK := locks/scan.txt" in makefile
    assert "SCAN_VENV := .venv-scan" in makefile


def test_function_and_layer_sets_come_from_pyproject() -> None:
    function = locks.requirements("function")
    layer = locks.requirements("layer")
    dev = locks.requirements("dev")
    assert any(r.startswith("starlette") for r in function)
    assert not any(r.startswith(("pydantic", "anthropic")) for r in function)
    layer_only = ("pydantic", "anthropic", "hyperscan", "xxhash")
    assert sorted(layer) == sorted(r for r in layer if r.startswith(layer_only))
    assert not any(r.startswith(("hyperscan", "xxhash")) for r in function)
    # The dev set is everything: the project's own extras expanded, never itself.
    assert set(function) | set(layer) <= set(dev)
    assert not any(r.startswith(locks.PROJECT) for r in dev)


def test_the_local_run_installs_what_serving_needs_and_nothing_else() -> None:
    """`make run` installs locks/serve.txt: the function, the policies, the stand-ins."""
    serve = _pins(locks.LOCKS / "serve.txt")
    for needed in ("starlette", "uvicorn", "pydantic", "anthropic", "moto", "flask"):
        assert needed in serve, needed
    for tool in ("mypy", "ruff", "pytest", "aws-sam-cli", "cfn-lint", "matplotlib", "numpy"):
        assert tool not in serve, f"{tool} is a dev tool, not something serving needs"
    assert len(serve) < len(_pins(locks.LOCKS / "dev.txt")) / 2


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "locks", tmp_path / "locks")
    (tmp_path / "release").mkdir()
    shutil.copy(SCRIPT, tmp_path / "release" / "locks.py")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(repo / "release" / "locks.py"), "check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_passes_on_the_committed_locks(repo_copy: Path) -> None:
    result = _check(repo_copy)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("old", "new", "stale"),
    [
        # A function range: the function locks, and the layer and dev locks made under them.
        (
            '"starlette>=0.47"',
            '"starlette>=0.48"',
            {"dev", "serve", "function-arm64", "layer-x86_64"},
        ),
        # A layer range: the layer locks (dev includes the layer set).
        ('"pydantic>=2.11"', '"pydantic>=2.12"', {"layer-arm64", "layer-x86_64", "dev"}),
        # A dev-only tool: dev, and the serve lock made under dev's pins.
        ('"pytest>=8.4"', '"pytest>=8.5"', {"dev", "serve"}),
        # A local-run-only range.
        ('"flask>=3.0"', '"flask>=3.1"', {"serve"}),
        # The scanner, resolved alone.
        ('"checkov>=3.2"', '"checkov>=3.3"', {"scan"}),
    ],
)
def test_a_changed_range_without_make_lock_fails_the_check(
    repo_copy: Path, old: str, new: str, stale: set[str]
) -> None:
    pyproject = repo_copy / "pyproject.toml"
    text = pyproject.read_text()
    assert old in text
    pyproject.write_text(text.replace(old, new))
    result = _check(repo_copy)
    assert result.returncode == 1
    assert "Run `make lock`" in result.stderr
    for name in stale:
        assert f"locks/{name}.txt is out of date with pyproject.toml" in result.stderr


def test_a_change_outside_the_dependencies_keeps_the_locks_valid(repo_copy: Path) -> None:
    pyproject = repo_copy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("line-length = 100", "line-length = 99"))
    assert _check(repo_copy).returncode == 0
