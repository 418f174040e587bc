"""A long hook beside a small call on one event loop: which of the two finishes first."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


def finishing_order(large: Callable[[], Awaitable[None]]) -> list[str]:
    """Run `large()` and a small call that only waits for its turn, on one loop; their
    names in the order they finished (["small", "large"] when `large` handed the loop back)."""
    finished: list[str] = []

    async def run_large() -> None:
        await large()
        finished.append("large")

    async def small() -> None:
        await asyncio.sleep(0)
        finished.append("small")

    async def both() -> None:
        await asyncio.gather(run_large(), small())

    asyncio.run(both())
    return finished
