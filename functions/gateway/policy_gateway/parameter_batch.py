"""The SSM parameters the gateway follows live (the flag, the chain), read in one call.

Parameter Store's GetParameter and GetParameters share one quota per account
and Region (40 calls a second by default). Read one by one, the flag and the
chain cost two calls per TTL in every environment; read together, one
GetParameters call per refresh (docs/deploy.md has the arithmetic).

Each parameter has a use: `make` turns SSM's answer into the value served (in
the worker thread that read it) and `on_error` decides what serves instead
when the read failed, the parameter is missing or `make` refused the answer
(the flag: off; the chain: the last good), and is the place to log. One
`parameters.TTLCache` holds every use's value, so they share its refresh rule:
an answer SSM gave, usable or not, is held for the TTL (so a refusal is
logged once per TTL), a failed read for a back-off.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

from .aws_reads import VersionedParameter, read_ssm_parameters
from .parameters import TTLCache

T = TypeVar("T")


class ParameterMissing(LookupError):
    """SSM answered without the parameter; the message names it."""


class ParameterUse(Generic[T]):
    """One parameter of a batch, and the rules that make its answer into a value."""

    def __init__(
        self,
        batch: ParameterBatch,
        name: str,
        make: Callable[[VersionedParameter], T],
        on_error: Callable[[Exception, T | None], T],
    ) -> None:
        self._batch = batch
        self.name = name
        self._make = make
        self._on_error = on_error
        self._last_good: T | None = None

    async def get(self) -> T:
        return cast(T, (await self._batch.values())[self.name])

    def value(self, answer: VersionedParameter | None) -> T:
        try:
            if answer is None:
                raise ParameterMissing(f"SSM has no parameter {self.name}")
            made = self._make(answer)
        except Exception as exc:
            return self.failed(exc)
        self._last_good = made
        return made

    def failed(self, exc: Exception) -> T:
        return self._on_error(exc, self._last_good)


class ParameterBatch:
    """Parameters read together, one GetParameters call per refresh of them all."""

    def __init__(
        self,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        read: Callable[[Sequence[str]], Mapping[str, VersionedParameter]] = read_ssm_parameters,
    ) -> None:
        self._read = read
        self._uses: dict[str, ParameterUse[Any]] = {}
        self._cache: TTLCache[dict[str, Any]] = TTLCache(self._load, ttl, self._failed, clock)

    def use(
        self,
        name: str,
        make: Callable[[VersionedParameter], T],
        on_error: Callable[[Exception, T | None], T],
    ) -> ParameterUse[T]:
        """Read `name` with the others from the next refresh on."""
        use = ParameterUse(self, name, make, on_error)
        self._uses[name] = use
        return use

    async def values(self) -> dict[str, Any]:
        return await self._cache.get()

    async def keep_fresh(self) -> None:
        await self._cache.keep_fresh()

    def _load(self) -> dict[str, Any]:
        answers = self._read(list(self._uses))
        return {name: use.value(answers.get(name)) for name, use in self._uses.items()}

    def _failed(self, exc: Exception, last: dict[str, Any] | None) -> dict[str, Any]:
        return {name: use.failed(exc) for name, use in self._uses.items()}
