"""`sam build` without a container: the one command line the tests and the bench run.

The build runs release/lambda.mk for each artifact, which needs the runtime's
interpreter, python3.13, on PATH; pyenv provides one when it is not the default
(PYENV_VERSION=3.11.7:3.13.0, as docs/deploy.md says). Standard library only.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
# The dev virtualenv installs the SAM CLI beside its interpreter.
SAM = Path(sys.executable).parent / "sam"
ARCHITECTURES = ("arm64", "x86_64")
# The artifacts' directories in a build, as template.yaml names the resources.
FUNCTION = "GatewayFunction"
LAYER = "PoliciesLayer"
# pyenv's python3.13 when it is not the default one (`pyenv install 3.13`).
PYENV_FALLBACK = "3.11.7:3.13.0"


@dataclass(frozen=True)
class Python313:
    executable: Path
    env: dict[str, str]  # what to add to the environment for python3.13 to resolve


class MissingPython313(RuntimeError):
    def __init__(self) -> None:
        super().__init__(
            "sam build (no container) needs a python3.13 on PATH; with pyenv: "
            f"pyenv install 3.13 and PYENV_VERSION={PYENV_FALLBACK}"
        )


def clean_environ() -> dict[str, str]:
    """This process's environment without its Python path.

    A 3.11 process's PYTHONPATH must not leak into the python3.13 that the build
    and the built function run.
    """
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def find_python313() -> Python313:
    """python3.13 as `sam build` will find it: on PATH, or through pyenv."""
    env = clean_environ()
    for extra in ({}, {"PYENV_VERSION": PYENV_FALLBACK}):
        try:
            found = subprocess.run(
                ["python3.13", "-c", "import sys; print(sys.executable)"],
                env={**env, **extra},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except FileNotFoundError:
            break
        if found.returncode == 0:
            return Python313(Path(found.stdout.strip()), extra)
    raise MissingPython313


def host_architecture() -> str:
    """The architecture of the artifact this machine can run."""
    return "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"


def command(build_dir: Path, arch: str) -> list[str]:
    return [
        str(SAM),
        "build",
        "--template-file",
        str(TEMPLATE),
        "--build-dir",
        str(build_dir),
        "--parameter-overrides",
        f"Architecture={arch}",
        "--no-cached",
        "--no-use-container",
    ]


def start(
    build_dir: Path, arch: str, python: Python313, output: int | IO[Any]
) -> subprocess.Popen[str]:
    """`sam build` of `arch` into `build_dir`, running; its output, merged, goes to `output`."""
    if not SAM.exists():
        raise RuntimeError(f"sam not found next to {sys.executable}; install the dev extras")
    return subprocess.Popen(
        command(build_dir, arch),
        cwd=ROOT,
        env={**clean_environ(), **python.env, "SAM_CLI_TELEMETRY": "0"},
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
    )
