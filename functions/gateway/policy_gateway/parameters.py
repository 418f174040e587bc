"""Values from SSM Parameter Store and Secrets Manager, cached with a TTL.

Reads go through Powertools Parameters, whose calls are blocking boto3: they
run in a worker thread, never on the event loop. boto3 itself is imported
only on the first read, keeping it off the cold path.

Our cache, not Powertools' (300 s by default), decides when a value is
stale. Every cached AWS value (flag, chain, secrets) follows one refresh rule:
on expiry one refresh runs, however many calls find the value expired; a call
waits for it at most REFRESH_WAIT_SECONDS, and past that the value held keeps
serving while the refresh finishes in the background. So a healthy AWS gives
fresh values on the first call after the TTL, and a stalled one never holds a
call for seconds once a value is held. Only the first read, with nothing to
serve yet, is waited for in full: READ_DEADLINE_SECONDS bounds it.

A failed read is cached for the TTL too (as what `on_error` made of it), so
an outage costs one read per TTL, not one per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread

from .observability.logs import logger

T = TypeVar("T")


class ValueFormatError(ValueError):
    """A value read from AWS has no usable shape; the message says why, never the value.

    Its message is therefore safe to log, which is why `keep_last_good` logs it.
    """


# One AWS read: two attempts in all (botocore's `total_max_attempts`; the
# `max_attempts` key would count retries only, three attempts in all), each
# given 1 s to connect and 2 s to read. Against an endpoint that accepts and
# never answers that is 2 s + a back-off of at most 1 s + 2 s.
CONNECT_TIMEOUT_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 2.0
TOTAL_ATTEMPTS = 2
# Whatever botocore's timeouts do not cover (DNS, fetching credentials, the
# retry's back-off) cannot make a read last longer than this: past it the read
# counts as failed and its worker thread is abandoned to botocore's timeouts.
READ_DEADLINE_SECONDS = 5.0
# How long a call that finds a held value expired waits for the refresh
# before that value serves: long enough for a healthy SSM (tens of ms), short
# enough that a stalled one is not felt.
REFRESH_WAIT_SECONDS = 0.25


def aws_config() -> Any:
    from botocore.config import Config

    # boto's defaults (60 s reads, three attempts) would let an AWS endpoint that
    # stalls, rather than refuses, hold a read for minutes.
    return Config(
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        retries={"total_max_attempts": TOTAL_ATTEMPTS, "mode": "standard"},
    )


@cache
def _ssm() -> Any:
    from aws_lambda_powertools.utilities.parameters import SSMProvider

    return SSMProvider(boto_config=aws_config())


@cache
def _secrets() -> Any:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto_config=aws_config())


def keep_last_good(secret: str, exc: Exception, last: T | None) -> T | None:
    """A secret cache's `on_error`: keep serving what was last read, and say so."""
    logger.error(
        "secret unreadable; keeping the last good value"
        if last is not None
        else "secret unreadable and never read; refusing calls until it is",
        extra={
            "secret": secret,
            "error_type": type(exc).__name__,
            # Its message names what is wrong with the secret, never its value.
            **({"reason": str(exc)} if isinstance(exc, ValueFormatError) else {}),
        },
    )
    return last


def read_ssm_parameter(name: str) -> str:
    return str(_ssm().get(name, force_fetch=True))


@dataclass(frozen=True)
class VersionedParameter:
    value: str
    version: int


def read_versioned_ssm_parameter(name: str) -> VersionedParameter:
    """The parameter's value and its version: what names the policy chain in force."""
    found = _ssm().client.get_parameter(Name=name, WithDecryption=True)["Parameter"]
    return VersionedParameter(str(found["Value"]), int(found["Version"]))


def read_secret(name: str) -> str:
    return str(_secrets().get(name, force_fetch=True))


class TTLCache(Generic[T]):
    """One value, loaded off the loop by `load` and kept for `ttl` seconds (by `clock`).

    When `load` fails or outlasts `deadline`, `on_error(exc, last)` decides
    what the cache holds until the next refresh (and is the place to log);
    `last` is the last value that loaded successfully, if any. A slow read is
    no error: the value held keeps serving until the read ends one way or the
    other.
    """

    def __init__(
        self,
        load: Callable[[], T],
        ttl: float,
        on_error: Callable[[Exception, T | None], T],
        clock: Callable[[], float] = time.monotonic,
        wait: float = REFRESH_WAIT_SECONDS,
        deadline: float = READ_DEADLINE_SECONDS,
    ) -> None:
        self._load = load
        self._ttl = ttl
        self._on_error = on_error
        self._clock = clock
        self._wait = wait
        self._deadline = deadline
        self._value: T | None = None
        self._held = False
        self._last_good: T | None = None
        self._expires = float("-inf")
        self._refreshing: asyncio.Task[None] | None = None

    async def get(self) -> T:
        if self._clock() < self._expires:
            return self._value  # type: ignore[return-value]
        refresh = self._refreshing
        if refresh is None:
            refresh = self._refreshing = asyncio.get_running_loop().create_task(self._refresh())
        # asyncio.wait never cancels the refresh: a call that stops waiting, or
        # is cancelled, leaves it running for the next one.
        await asyncio.wait({refresh}, timeout=self._wait if self._held else None)
        return self._value  # type: ignore[return-value]

    async def _refresh(self) -> None:
        try:
            with anyio.fail_after(self._deadline):
                value = await anyio.to_thread.run_sync(self._load, abandon_on_cancel=True)
        except Exception as exc:
            value = self._on_error(exc, self._last_good)
        else:
            self._last_good = value
        finally:
            self._refreshing = None
        self._value = value
        self._held = True
        self._expires = self._clock() + self._ttl
