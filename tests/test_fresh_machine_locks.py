"""Every lock installs with what a fresh machine has: its stock python3 and the pip it bundles.

A fresh machine's python3 (3.11.7) bundles pip 23.2.1, which refuses the dev lock
(`boto3[crt]==…` does not pin `boto3` for it). release/venv.py therefore installs
locks/pip.txt into each virtualenv before its lock; these tests go the same way
from the interpreter that made this virtualenv (the machine's own, not the
virtualenv's), so removing that bootstrap fails them. The Lambda locks are
resolved as release/lambda.mk installs them: python3.13's own pip, Linux wheels
for the runtime.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.deploy, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "locks"
# The interpreter this virtualenv was made from: the machine's stock python3.
STOCK_PYTHON = getattr(sys, "_base_executable", sys.executable)
LAMBDA_PLATFORMS = {
    "arm64": ["manylinux_2_28_aarch64", "manylinux2014_aarch64"],
    "x86_64": ["manylinux2014_x86_64"],
}


def _environ(cache: Path) -> dict[str, str]:
    """Nothing borrowed: no user site-packages, no virtualenv, a cache of this run's own."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    environ.pop("VIRTUAL_ENV", None)
    return {**environ, "PYTHONNOUSERSITE": "1", "PIP_CACHE_DIR": str(cache)}


@pytest.fixture(scope="module")
def pip_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pip-cache")


def _run(command: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=900)


def test_a_new_virtualenv_starts_with_the_stock_pip_and_leaves_with_the_locked_one(
    tmp_path: Path, pip_cache: Path
) -> None:
    environ = _environ(pip_cache)
    _run([STOCK_PYTHON, "-m", "venv", str(tmp_path / "bare")], environ).check_returncode()
    stock = _run([str(tmp_path / "bare/bin/python"), "-m", "pip", "--version"], environ).stdout
    locked = (LOCKS / "pip.txt").read_text().split("pip==", 1)[1].split()[0]
    made = _run(
        [STOCK_PYTHON, str(ROOT / "release/venv.py"), str(tmp_path / "v"), str(LOCKS / "pip.txt")],
        environ,
    )
    assert made.returncode == 0, made.stderr
    version = _run([str(tmp_path / "v/bin/python"), "-m", "pip", "--version"], environ).stdout
    assert version.startswith(f"pip {locked} "), (stock, version)


@pytest.mark.parametrize("name", ["dev", "serve", "scan"])
def test_each_machine_lock_resolves_from_the_stock_interpreter(
    name: str, tmp_path: Path, pip_cache: Path
) -> None:
    result = _run(
        [
            STOCK_PYTHON,
            str(ROOT / "release/venv.py"),
            str(tmp_path / "v"),
            str(LOCKS / f"{name}.txt"),
            "--dry-run",
        ],
        _environ(pip_cache),
    )
    assert result.returncode == 0, result.stderr[-4000:]


def _python313() -> str:
    """As release/lambda.mk finds it: a python3.13 that runs from PATH, else pyenv's."""
    probe = ["python3.13", "-c", "import sys; print(sys.executable)"]
    ran = subprocess.run(probe, capture_output=True, text=True, check=False)
    if ran.returncode == 0:
        return ran.stdout.strip()
    pyenv = shutil.which("pyenv")
    assert pyenv, "no python3.13 (release/lambda.mk needs one on PATH or through pyenv)"
    whence = subprocess.run([pyenv, "whence", "python3.13"], capture_output=True, text=True)
    root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
    versions = whence.stdout.split()
    assert versions, "no python3.13 (release/lambda.mk needs one on PATH or through pyenv)"
    return f"{root}/versions/{versions[-1]}/bin/python3.13"


@pytest.mark.parametrize("arch", sorted(LAMBDA_PLATFORMS))
@pytest.mark.parametrize("group", ["function", "layer", "breaker"])
def test_each_lambda_lock_resolves_as_the_build_installs_it(
    group: str, arch: str, pip_cache: Path
) -> None:
    platforms = [option for p in LAMBDA_PLATFORMS[arch] for option in ("--platform", p)]
    result = _run(
        [
            _python313(),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--dry-run",
            "--ignore-installed",
            "--require-hashes",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            "3.13",
            *platforms,
            "-r",
            str(LOCKS / f"{group}-{arch}.txt"),
        ],
        _environ(pip_cache),
    )
    assert result.returncode == 0, result.stderr[-4000:]
