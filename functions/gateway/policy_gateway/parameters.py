"""Values from SSM Parameter Store and Secrets Manager, cached with a TTL.

Reads go through Powertools Parameters, whose calls are blocking boto3: they
run in a worker thread, never on the event loop. boto3 itself is imported
only on the first read, keeping it off the cold path.

Our cache, not Powertools' (300 s by default), decides when a value is
stale: a change is seen by the first read after the TTL expires. A failed
read is cached for the TTL too, so an SSM outage costs one call per TTL, not
one per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import cache
from typing import Any, Generic, TypeVar

import anyio.to_thread

T = TypeVar("T")


def aws_config() -> Any:
    from botocore.config import Config

    # boto's defaults (60 s reads, retries) would let an AWS endpoint that
    # stalls, rather than refuses, hold every call that finds the cache expired.
    return Config(
        connect_timeout=2, read_timeout=3, retries={"max_attempts": 2, "mode": "standard"}
    )


@cache
def _ssm() -> Any:
    from aws_lambda_powertools.utilities.parameters import SSMProvider

    return SSMProvider(boto_config=aws_config())


@cache
def _secrets() -> Any:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto_config=aws_config())


def read_ssm_parameter(name: str) -> str:
    return str(_ssm().get(name, force_fetch=True))


def read_secret(name: str) -> str:
    return str(_secrets().get(name, force_fetch=True))


class TTLCache(Generic[T]):
    """One value, loaded off the loop by `load` and kept for `ttl` seconds.

    When `load` fails, `on_error(exc, last)` decides what to serve (and is the
    place to log); `last` is the last value that loaded successfully, if any.
    """

    def __init__(
        self,
        load: Callable[[], T],
        ttl: float,
        on_error: Callable[[Exception, T | None], T],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._ttl = ttl
        self._on_error = on_error
        self._clock = clock
        self._value: T | None = None
        self._last_good: T | None = None
        self._expires = float("-inf")
        self._lock: asyncio.Lock | None = None

    async def get(self) -> T:
        if self._clock() < self._expires:
            return self._value  # type: ignore[return-value]
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._clock() >= self._expires:
                await self._refresh()
        return self._value  # type: ignore[return-value]

    async def _refresh(self) -> None:
        try:
            value = await anyio.to_thread.run_sync(self._load)
        except Exception as exc:
            value = self._on_error(exc, self._last_good)
        else:
            self._last_good = value
        self._value = value
        self._expires = self._clock() + self._ttl
