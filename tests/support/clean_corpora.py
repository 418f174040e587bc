"""Named clean corpora for measuring false positives: text with no credential in it.

- `stdlib`: the Python standard library's source as installed (the interpreter's lib dir),
  outside its test packages (`Lib/test`, `*/tests`, `idle_test`), which hold deliberate
  test keys and card numbers;
- `git_hashes`: `git log`-shaped lines of random 40-hex commit ids;
- `uuids`: JSON records keyed by random UUIDs;
- `base64_images`: image content blocks of random PNG data, as a request carries them.

Each corpus is a list of texts (a file, a block), drawn deterministically from a seed, so a
measurement over the same size is the same measurement everywhere.
"""

from __future__ import annotations

import base64
import json
import random
import sysconfig
import uuid
from collections.abc import Callable
from pathlib import Path

STDLIB = Path(sysconfig.get_paths()["stdlib"])
_TEST_DIRS = {"test", "tests", "idle_test", "site-packages"}


def stdlib_files() -> list[Path]:
    """The standard library's Python sources outside its test packages, in a fixed order."""
    return sorted(
        path
        for path in STDLIB.rglob("*.py")
        if _TEST_DIRS.isdisjoint(path.relative_to(STDLIB).parts[:-1])
    )


def stdlib(size: int, seed: int) -> list[str]:
    """Whole files, every file in turn from a seeded offset, until `size` characters."""
    files = stdlib_files()
    start = random.Random(seed).randrange(len(files))
    texts: list[str] = []
    total = 0
    for index in range(len(files)):
        if total >= size:
            break
        text = files[(start + index) % len(files)].read_text(errors="replace")
        texts.append(text)
        total += len(text)
    return texts


def _blocks(size: int, make: Callable[[], str]) -> list[str]:
    texts: list[str] = []
    total = 0
    while total < size:
        texts.append(make())
        total += len(texts[-1])
    return texts


def git_hashes(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)

    def log() -> str:
        return "".join(
            f"commit {rng.getrandbits(160):040x}\nMerge: {rng.getrandbits(28):07x}\n\n"
            f"    fix {rng.getrandbits(28):07x}\n\n"
            for _ in range(200)
        )

    return _blocks(size, log)


def uuids(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)

    def records() -> str:
        rows = [
            {"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "n": i} for i in range(300)
        ]
        return json.dumps(rows, indent=1)

    return _blocks(size, records)


def base64_images(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)

    def image() -> str:
        data = b"\x89PNG\r\n\x1a\n" + rng.randbytes(48_000)
        return base64.b64encode(data).decode()

    return _blocks(size, image)


CORPORA: dict[str, Callable[[int, int], list[str]]] = {
    "stdlib": stdlib,
    "git_hashes": git_hashes,
    "uuids": uuids,
    "base64_images": base64_images,
}
