"""Hash-pinned locks of every dependency set, generated from pyproject.toml.

pyproject.toml is the one place where direct dependencies and their allowed
ranges are declared: `[project].dependencies` is what the Lambda function needs
at run time, the `layer` extra what the policies layer needs, the `breaker`
extra what the fallback breaker function needs, the `serve` extra what a
local run adds (its stand-ins), the `dev` extra the tools and tests, the `scan`
extra the template's security scanner. This script pins each set with uv
(`uv pip compile --generate-hashes`):

- locks/function-<arch>.txt, locks/layer-<arch>.txt and locks/breaker-<arch>.txt
  for the Lambda runtime
  (python3.13; manylinux2014 on x86_64, manylinux_2_28 on arm64, where Hyperscan
  ships no older wheel: fine on the runtime's glibc 2.34): `sam build` installs
  them with `pip --require-hashes` (release/lambda.mk);
- locks/dev.txt for the development and CI machine (Python 3.11, linux x86_64):
  `make` installs the virtualenv from it, hash-checked;
- locks/serve.txt for `make run` on the same machine: what serving locally
  needs (the function, the policies, the stand-ins) and nothing else, in a
  virtualenv of its own, so a first run installs in seconds, not minutes.
- locks/scan.txt for the same machine: checkov, which `make scan` installs in a
  virtualenv of its own because its pins conflict with the dev set's.
- locks/pip.txt: the pip every virtualenv installs first (release/venv.py), so no
  lock depends on the pip the machine's interpreter happens to bundle.

The function is resolved under the dev set's pins and the layer under both, so
a package shared by the sets (uvicorn, anyio, pydantic, ...) has one version
everywhere: the tests run what the function and the layer ship. The scan set is
resolved alone: nothing it pins is imported by the tests or shipped.

Each lock's first line records a digest of what it was made from (the
dependency declarations and the lock settings). `check` recomputes it, so a
range changed in pyproject.toml without `make lock` fails `make test` with a
message that says so. The check needs only the standard library: it runs before
the virtualenv exists.

    python release/locks.py check            # is every lock up to date?
    python release/locks.py compile          # make lock: keep pins still allowed
    python release/locks.py compile --upgrade  # make lock-upgrade: newest allowed
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
LOCKS = ROOT / "locks"
PROJECT = "policy-gateway"
DIGEST_PREFIX = "# inputs-sha256: "
REGENERATE = "make lock"
# The Lambda runtime (template.yaml: Runtime python3.13) and both architectures
# it offers; the names are the template's `Architecture` parameter values.
LAMBDA_PYTHON = "3.13"
# arm64 is manylinux_2_28: the layer's hyperscan has no manylinux2014 aarch64 wheel.
LAMBDA_PLATFORMS = {"arm64": "aarch64-manylinux_2_28", "x86_64": "x86_64-manylinux2014"}
# The development and CI machine (Makefile: the virtualenv's python3).
DEV_PYTHON = "3.11"
DEV_PLATFORM = "x86_64-manylinux2014"


@dataclass(frozen=True)
class Lock:
    """One lock file: which dependency set, for which interpreter and platform."""

    name: str
    group: str  # "function", "layer", "breaker", "serve", "dev", "scan" or "installer"
    python: str
    platform: str
    constraints: tuple[str, ...] = ()  # names of locks whose pins this one keeps

    @property
    def path(self) -> Path:
        return LOCKS / f"{self.name}.txt"


def all_locks() -> list[Lock]:
    """In dependency order: a lock comes after the locks it is constrained by.

    The dev set is resolved first and the Lambda sets keep its pins: a package
    the tests import has the version the function and the layer ship. (The cost:
    a dev tool's own pin can hold a run-time package back; aws-sam-cli pins
    click, which caps uvicorn. docs/deploy.md says how to see it.)
    """
    locks = [Lock("pip", "installer", DEV_PYTHON, DEV_PLATFORM)]
    locks.append(Lock("dev", "dev", DEV_PYTHON, DEV_PLATFORM))
    # The local run serves with the versions the tests test.
    locks.append(Lock("serve", "serve", DEV_PYTHON, DEV_PLATFORM, ("dev",)))
    locks += [
        Lock(f"function-{arch}", "function", LAMBDA_PYTHON, platform, ("dev",))
        for arch, platform in LAMBDA_PLATFORMS.items()
    ]
    locks += [
        Lock(f"{group}-{arch}", group, LAMBDA_PYTHON, platform, ("dev", f"function-{arch}"))
        for group in ("layer", "breaker")
        for arch, platform in LAMBDA_PLATFORMS.items()
    ]
    locks.append(Lock("scan", "scan", DEV_PYTHON, DEV_PLATFORM))
    return locks


# --------------------------------------------------------------- what goes in


@dataclass(frozen=True)
class Declared:
    """What pyproject.toml declares about dependencies, and nothing else."""

    requires_python: str
    dependencies: tuple[str, ...]
    extras: dict[str, tuple[str, ...]]

    @classmethod
    def read(cls, pyproject: Path = PYPROJECT) -> Declared:
        project = tomllib.loads(pyproject.read_text())["project"]
        extras = project.get("optional-dependencies", {})
        return cls(
            str(project.get("requires-python", "")),
            tuple(project.get("dependencies", ())),
            {name: tuple(requirements) for name, requirements in extras.items()},
        )


def requirements(group: str, pyproject: Path = PYPROJECT) -> list[str]:
    """The direct requirements of one set, with the project's own extras expanded.

    The function set is `[project].dependencies`; the layer, breaker, scan and
    installer sets are their extras alone; the dev and serve sets are the dependencies plus
    their extra, which names `policy-gateway[layer]` because both import the policies too.
    """
    declared = Declared.read(pyproject)
    if group == "function":
        return list(declared.dependencies)
    expanded: list[str] = []
    seen: set[str] = set()

    def add(extra: str) -> None:
        if extra in seen:
            return
        seen.add(extra)
        for requirement in declared.extras[extra]:
            own = re.fullmatch(rf"{PROJECT}\[([^\]]+)\]", requirement.replace(" ", ""))
            if own:
                for name in own.group(1).split(","):
                    add(name)
            else:
                expanded.append(requirement)

    add(group)
    return [*declared.dependencies, *expanded] if group in ("dev", "serve") else expanded


def inputs_digest(lock: Lock, pyproject: Path = PYPROJECT) -> str:
    """What the lock was made from: its requirements, its target, and those of its constraints."""
    made_from: dict[str, object] = {
        other.name: {
            "requirements": requirements(other.group, pyproject),
            "python": other.python,
            "platform": other.platform,
            "constraints": other.constraints,
        }
        for other in all_locks()
        if other.name == lock.name or other.name in lock.constraints
    }
    made_from["requires-python"] = Declared.read(pyproject).requires_python
    return hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()


# -------------------------------------------------------------------- check


def recorded_digest(path: Path) -> str | None:
    if not path.is_file():
        return None
    first = path.read_text().split("\n", 1)[0]
    return first.removeprefix(DIGEST_PREFIX) if first.startswith(DIGEST_PREFIX) else None


def stale_locks(pyproject: Path = PYPROJECT, locks: Iterable[Lock] | None = None) -> list[str]:
    """One line per lock that is missing or was made from other inputs."""
    problems = []
    for lock in all_locks() if locks is None else locks:
        recorded = recorded_digest(lock.path)
        if recorded is None:
            problems.append(f"{lock.path.relative_to(ROOT)} is missing or has no digest line")
        elif recorded != inputs_digest(lock, pyproject):
            problems.append(
                f"{lock.path.relative_to(ROOT)} is out of date with pyproject.toml "
                f"(its {lock.group} dependencies changed)"
            )
    return problems


def check() -> int:
    problems = stale_locks()
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(
            f"Run `{REGENERATE}` to regenerate the locks, and commit them with pyproject.toml.",
            file=sys.stderr,
        )
        return 1
    print(f"locks up to date with pyproject.toml ({len(all_locks())} files)")
    return 0


# ------------------------------------------------------------------ compile


def _uv() -> str:
    # The dev virtualenv's uv (it is in locks/dev.txt), else one on PATH.
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        sys.exit("uv not found: run `make lock` (it installs the dev virtualenv first)")
    return found


def compile_lock(lock: Lock, upgrade: bool) -> None:
    command = [
        _uv(),
        "pip",
        "compile",
        "-",
        "--quiet",
        "--generate-hashes",
        "--no-header",
        # pip --require-hashes treats "pkg[extra]" as a requirement of its own:
        # keep the extras on the pinned lines so pip sees them pinned too.
        "--no-strip-extras",
        "--python-version",
        lock.python,
        "--python-platform",
        lock.platform,
        "--output-file",
        str(lock.path),
    ]
    for name in lock.constraints:
        command += ["--constraint", str(LOCKS / f"{name}.txt")]
    if upgrade:
        command.append("--upgrade")
    # uv reads an existing --output-file as the pins to keep: `make lock` moves
    # only what the changed ranges force, `--upgrade` moves everything.
    subprocess.run(
        command, input="\n".join(requirements(lock.group)) + "\n", text=True, check=True, cwd=ROOT
    )
    body = lock.path.read_text()
    lock.path.write_text(
        f"{DIGEST_PREFIX}{inputs_digest(lock)}\n"
        f"# {lock.group} dependencies for Python {lock.python} on {lock.platform}, "
        "hash-pinned from pyproject.toml.\n"
        f"# Generated by `{REGENERATE}` (release/locks.py); do not edit by hand.\n" + body
    )


def compile_all(upgrade: bool) -> int:
    LOCKS.mkdir(exist_ok=True)
    pending = all_locks()
    done: set[str] = set()
    # Each round compiles, in parallel, the locks whose constraints are already made.
    with ThreadPoolExecutor(max_workers=4) as pool:
        while pending:
            ready = [lock for lock in pending if set(lock.constraints) <= done]
            list(pool.map(lambda lock: compile_lock(lock, upgrade), ready))
            done |= {lock.name for lock in ready}
            pending = [lock for lock in pending if lock.name not in done]
    for lock in all_locks():
        print(f"wrote {lock.path.relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="fail if a lock is out of date with pyproject.toml")
    compile_parser = commands.add_parser("compile", help="regenerate every lock")
    compile_parser.add_argument(
        "--upgrade", action="store_true", help="move every pin to the newest allowed version"
    )
    args = parser.parse_args(argv)
    if args.command == "check":
        return check()
    return compile_all(args.upgrade)


if __name__ == "__main__":
    raise SystemExit(main())
