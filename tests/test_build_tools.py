"""What `sam build` needs is found, or named: python3.13 and the SBOM tool (release/lambda.mk).

These run make's dry run (-n) on release/lambda.mk, the build's own Makefile,
so they show what `sam build` would run without running it (tests/test_sam_build.py
runs the build itself).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "release"
# PATH without the dev virtualenv, pyenv's shims or anything a developer added.
BARE_PATH = "/usr/bin:/bin"


def dry_run(
    release: Path, env: dict[str, str], *overrides: str
) -> subprocess.CompletedProcess[str]:
    """`make -n` of the function's build target, as `sam build` runs it (from the code's copy)."""
    return subprocess.run(
        [
            "make",
            "-n",
            "-f",
            str(release / "x86_64" / "Makefile"),
            "build-GatewayFunction",
            "ARTIFACTS_DIR=/nonexistent/artifacts",
            *overrides,
        ],
        cwd=ROOT / "functions" / "gateway",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _environ(path: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k not in ("PYENV_VERSION", "PYTHONPATH")},
        "PATH": path,
    }


def test_python313_is_found_through_pyenv_without_pyenv_version() -> None:
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        pytest.skip("no pyenv here: python3.13 must be on PATH")
    shims = str(Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "shims")
    path = f"{Path(pyenv).parent}:{shims}:{Path(sys.executable).parent}:{BARE_PATH}"
    result = dry_run(RELEASE, _environ(path))
    assert result.returncode == 0, result.stderr
    (pip,) = [line for line in result.stdout.splitlines() if " -m pip install " in line]
    interpreter = pip.split(" -m pip install ")[0]
    assert Path(interpreter).is_absolute()
    version = subprocess.run(
        [interpreter, "-c", "import sys; print(sys.version_info[:2])"],
        env=_environ(BARE_PATH),
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "(3, 13)"


def test_a_missing_python313_is_named_with_the_fix() -> None:
    result = dry_run(RELEASE, _environ(BARE_PATH))
    assert result.returncode != 0
    assert "no python3.13 found on PATH or through pyenv: install one (pyenv install 3.13)" in (
        result.stderr
    )


def test_a_missing_sbom_tool_points_at_make_build(tmp_path: Path) -> None:
    # A checkout without .venv: the build's Makefiles alone, beside no virtualenv.
    release = tmp_path / "release"
    shutil.copytree(RELEASE, release, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    result = dry_run(release, _environ(BARE_PATH), f"PYTHON313={sys.executable}")
    assert result.returncode != 0
    assert "cyclonedx-py (the SBOM tool) not found: run `make build`" in result.stderr
    assert "/bin/sh" not in result.stderr


def test_make_build_runs_sam_build_with_the_dev_tools_on_path() -> None:
    result = subprocess.run(
        ["make", "-n", "build", "SAM_BUILD_ARGS=--parameter-overrides Architecture=x86_64"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "sam build" in line]
    assert f'PATH="{ROOT}/.venv/bin:$PATH"' in line
    assert line.endswith(".venv/bin/sam build --parameter-overrides Architecture=x86_64")
