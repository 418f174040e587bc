"""What every fake upstream shares: the requests it saw, and the replies it is told to give."""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

RequestT = TypeVar("RequestT")
ReplyT = TypeVar("ReplyT")


class Scripted(Generic[RequestT, ReplyT]):
    """Recording and scripting, safe across the test's thread and the server's."""

    def __init__(self) -> None:
        self.requests: list[RequestT] = []
        self._script: deque[ReplyT] = deque()
        self._lock = threading.Lock()

    def script(self, *replies: ReplyT) -> None:
        """Answer the next requests with these, in order, then as usual again."""
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
