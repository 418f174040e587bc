"""Create a virtualenv from a hash-pinned lock, with the pip the locks were made for.

A fresh machine's `python3` bundles whatever pip its release shipped (3.11.7: pip
23.2.1), and that pip cannot install every lock: it does not count an extra's pin
(`boto3[crt]==…`) as the plain name's, so `--require-hashes` refuses the dev lock.
So a virtualenv never installs a lock with the pip it was born with: it first
installs locks/pip.txt (itself hash-pinned, `make lock` keeps it), then the lock.

Standard library only: it runs before any virtualenv exists.

    python3 release/venv.py .venv locks/dev.txt            # the Makefile's use
    python3 release/venv.py /tmp/v locks/dev.txt --dry-run  # resolve only (tests)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIP_LOCK = ROOT / "locks" / "pip.txt"


def pip_install(python: Path, lock: Path, *options: str) -> None:
    command = [str(python), "-m", "pip", "install", "--quiet", "--require-hashes", *options]
    subprocess.run([*command, "-r", str(lock)], check=True)


def create(venv: Path, lock: Path, *, dry_run: bool = False, no_compile: bool = False) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip_install(python, PIP_LOCK)
    options = ["--dry-run"] if dry_run else []
    if no_compile:
        options.append("--no-compile")
    pip_install(python, lock, *options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("venv", type=Path, help="the virtualenv's folder")
    parser.add_argument("lock", type=Path, help="the lock to install (locks/*.txt)")
    parser.add_argument("--dry-run", action="store_true", help="resolve the lock, install nothing")
    parser.add_argument("--no-compile", action="store_true", help="do not byte-compile")
    args = parser.parse_args(argv)
    create(args.venv, args.lock, dry_run=args.dry_run, no_compile=args.no_compile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
