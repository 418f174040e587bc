"""`policy-gateway` run as operators run it: a child process, its JSON answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-m", "policy_gateway", *args],
        capture_output=True,
        input=stdin,
        text=True,
        timeout=60,
        env={**environ, **(env or {})},
        check=False,
    )


def status_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert isinstance(loaded, dict)
    return loaded
