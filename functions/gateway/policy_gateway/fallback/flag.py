"""The passthrough-fallback flag, an SSM parameter toggled live by operators.

Fail-closed: `true`/`false` (any case) are the only values; anything else, a
missing parameter or an SSM error means off, with one warning per failed read
(retried after a short back-off, `parameters.RETRY_MAX_SECONDS` at most). The
flag never fails a request.

Unlike the chain and the secrets, the flag does not keep its last good value
through an error: the fallback is fail-open for request-side policies, and an
operator who turned it off during an incident must not be overruled by an SSM
the gateway cannot read. A read that is merely slow is no error (see
`parameters.TTLCache`): the value held serves until the read answers or, at
`READ_DEADLINE_SECONDS`, fails and turns the flag off.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..observability.logs import logger
from ..parameters import TTLCache, read_ssm_parameter


def parse_flag(value: str) -> bool | None:
    normalized = value.strip().lower()
    if normalized == "true":
        return True
    if normalized == "false":
        return False
    return None


class FallbackFlag:
    def __init__(
        self,
        parameter: str,
        ttl: float,
        reader: Callable[[str], str] = read_ssm_parameter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.parameter = parameter
        self._reader = reader
        self._cache = TTLCache(self._read, ttl, self._off_on_error, clock)

    def _read(self) -> bool:
        raw = self._reader(self.parameter)
        parsed = parse_flag(raw)
        if parsed is None:
            logger.warning(
                "fallback flag has an invalid value; treating it as off",
                extra={"parameter": self.parameter, "value_length": len(raw)},
            )
            return False
        return parsed

    def _off_on_error(self, exc: Exception, last: bool | None) -> bool:
        logger.warning(
            "fallback flag unreadable; treating it as off",
            extra={"parameter": self.parameter, "error": type(exc).__name__},
        )
        return False

    async def enabled(self) -> bool:
        return await self._cache.get()
