"""Where the active policy chain comes from, and what happens when it is broken.

The chain JSON is read from the SSM parameter named by POLICY_CONFIG_PARAMETER
(live: re-read every TTL) or from inline POLICY_CONFIG; the parameter wins.
A bad config never takes the gateway down: the last good chain keeps serving,
the error is logged and counted; so does an SSM that errors or stalls (see
`parameters.TTLCache`), since the last good chain is still the operator's. With
no good chain ever loaded, requests fail closed: running without the
operator's policies would silently weaken them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from gateway_policies import PolicyChain, PolicyConfigError, PolicyDocument, load_document

from . import names
from .errors import GatewayError
from .observability import metrics
from .observability.logs import logger
from .parameters import TTLCache, read_ssm_parameter

NO_CHAIN_MESSAGE = (
    "The gateway has no valid policy configuration, so it refuses requests until an "
    "operator fixes it."
)


class PolicySource:
    def __init__(
        self,
        inline: str | None,
        parameter: str | None,
        ttl: float,
        reader: Callable[[str], str] = read_ssm_parameter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._parameter = parameter
        self._reader = reader
        self._static: PolicyDocument | None = None
        self._cache: TTLCache[PolicyDocument | None] | None = None
        if parameter:
            self._cache = TTLCache(self._load_parameter, ttl, self._keep_last_good, clock)
        elif inline:
            try:
                self._static = load_document(inline)
            except PolicyConfigError as exc:
                logger.error("inline policy config is invalid", extra={"error": str(exc)})
        else:
            self._static = PolicyDocument()

    def _load_parameter(self) -> PolicyDocument | None:
        assert self._parameter is not None
        return load_document(self._reader(self._parameter))

    def _keep_last_good(self, exc: Exception, last: PolicyDocument | None) -> PolicyDocument | None:
        metrics.count(names.METRIC_POLICY_CONFIG_ERRORS)
        logger.error(
            "policy config unusable; keeping the last good chain"
            if last is not None
            else "policy config unusable and no good chain was ever loaded; failing closed",
            extra={
                "parameter": self._parameter,
                "error_type": type(exc).__name__,
                "error": str(exc) if isinstance(exc, PolicyConfigError) else "",
            },
        )
        return last

    async def load(self) -> PolicyDocument | None:
        """The document in force, None when no good one was ever loaded."""
        return await self._cache.get() if self._cache is not None else self._static

    async def chain(self, caller: str | None = None, groups: Sequence[str] = ()) -> PolicyChain:
        """The chain in force for `caller` (and its `groups`): see PolicyDocument.resolve."""
        document = await self.load()
        if document is None:
            # A fresh error per call: a shared instance would keep every raise's frames.
            raise GatewayError(500, NO_CHAIN_MESSAGE, "api_error")
        return document.resolve(caller, groups)
