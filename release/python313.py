"""Where python3.13 is, as `sam build` without a container finds it: on PATH, or through pyenv.

Standard library only. tests/test_sam_build.py and bench/run.py load it from its path.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

# pyenv's python3.13 when it is not the default one (`pyenv install 3.13`).
PYENV_FALLBACK = "3.11.7:3.13.0"


def find(env: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """python3.13's path and what `env` needs added for it to resolve; None without one."""
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
            return None
        if found.returncode == 0:
            return found.stdout.strip(), extra
    return None
