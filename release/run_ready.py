"""How long `make run` takes from a fresh clone until the gateway answers /healthz.

    python3 release/run_ready.py [--ref REF] [--cold] [--port P] [--ssm-port P]

Clones this repository (its HEAD, or REF) into a temporary directory, runs
`make run PORT=P SSM_PORT=P` there, and prints one JSON line: the seconds from
the start of `make run` until GET /healthz answers 200, and the size of the
virtualenv it built. With --cold, pip's cache is a new empty directory, so
every package is downloaded, as on a machine that never installed them; without
it, pip's own cache serves what an earlier run downloaded. docs/performance.md
has the figures. Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLL_SECONDS = 0.2
# Virtualenvs a `make run` may build: today's own, or the dev one an older
# Makefile's `make run` built.
VENVS = (".venv-run", ".venv")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _size_mb(path: Path) -> float:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return round(total / 1e6, 1)


def measure(
    ref: str | None, cold: bool, port: int, ssm_port: int, timeout: float
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="run-ready-") as scratch:
        clone = Path(scratch) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        if ref:
            subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", ref], check=True)
        env = dict(os.environ)
        if cold:
            env["PIP_CACHE_DIR"] = str(Path(scratch) / "pip-cache")
        log = (Path(scratch) / "make-run.log").open("wb")
        started = time.monotonic()
        make = subprocess.Popen(
            ["make", "run", f"PORT={port}", f"SSM_PORT={ssm_port}"],
            cwd=clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        ready: float | None = None
        try:
            while time.monotonic() - started < timeout and make.poll() is None:
                if _healthy(f"http://127.0.0.1:{port}/healthz"):
                    ready = time.monotonic() - started
                    break
                time.sleep(POLL_SECONDS)
        finally:
            if make.poll() is None:
                os.killpg(make.pid, signal.SIGTERM)
            make.wait(timeout=30)
            log.close()
        venv = next((clone / name for name in VENVS if (clone / name).is_dir()), None)
        if ready is None:
            tail = (Path(scratch) / "make-run.log").read_text(errors="replace")[-2000:]
            print(tail, file=sys.stderr)
        return {
            "ref": ref or "HEAD",
            "commit": subprocess.run(
                ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip(),
            "cold_pip_cache": cold,
            "ready_seconds": None if ready is None else round(ready, 1),
            "virtualenv": None if venv is None else venv.name,
            "virtualenv_mb": None if venv is None else _size_mb(venv),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--ref", help="a commit or branch to measure instead of HEAD")
    parser.add_argument("--cold", action="store_true", help="start with an empty pip cache")
    parser.add_argument("--port", type=int, default=0, help="the gateway's port (default: free)")
    parser.add_argument("--ssm-port", type=int, default=0, help="the stand-in's (default: free)")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    result = measure(
        args.ref,
        args.cold,
        args.port or _free_port(),
        args.ssm_port or _free_port(),
        args.timeout,
    )
    print(json.dumps(result))
    return 0 if result["ready_seconds"] is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
