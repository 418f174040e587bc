"""A second event loop, in its own thread, for the CPU-heavy steps of a call.

Parsing a multi-megabyte body, running the request hooks (a redaction regex
over 6 MB of text) and re-serializing take tens to hundreds of milliseconds of
CPU. On the serving loop that time would stall every other call of the
process, `/healthz` included; here the serving loop keeps answering, since the
interpreter hands the GIL back to it between the worker's steps.

Request hooks therefore always run on this loop (never sometimes here and
sometimes there, so a policy sees one loop for all its request hooks), while
response and stream hooks run on the serving loop. A coroutine sent here keeps
the caller's context variables (the call's log keys) and is cancelled when
its caller is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _worker_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="policy-worker", daemon=True).start()
            _loop = loop
        return _loop


async def run(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` on the worker loop and wait for it without blocking this loop."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, _worker_loop()))
