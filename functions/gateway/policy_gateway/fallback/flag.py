"""The passthrough-fallback flag, an SSM parameter toggled live by operators.

Fail-closed: `true`/`false` (any case) are the only values; anything else, a
missing parameter or an SSM error means off, with one warning per read that
found it so (an answer is held for the TTL, a failed read retried after a
short back-off, `parameters.RETRY_MAX_SECONDS` at most). The flag never fails
a request. It is read with the chain, in one GetParameters call
(`parameter_batch.ParameterBatch`).

Unlike the chain and the secrets, the flag does not keep its last good value
through an error: the fallback is fail-open for request-side policies, and an
operator who turned it off during an incident must not be overruled by an SSM
the gateway cannot read. A read that is merely slow is no error (see
`parameters.TTLCache`): the value held serves until the read answers or, at
`READ_DEADLINE_SECONDS`, fails and turns the flag off.
"""

from __future__ import annotations

from ..aws_reads import VersionedParameter
from ..observability.logs import logger
from ..parameter_batch import ParameterBatch, ParameterMissing

# What the operator's commands write (`flag on|off`, `init`, and the local run's seed).
FLAG_VALUES = {"on": "true", "off": "false"}
# The flag parameter is created with this pattern, so SSM refuses any other value.
FLAG_ALLOWED_PATTERN = "^(true|false)$"


def flag_parameter(name: str, value: str) -> dict[str, str]:
    """The flag as PutParameter writes it."""
    # The pattern makes SSM itself refuse a typo ("ture", "on") from any writer
    # (console, aws cli) instead of the gateway reading it as off.
    return {
        "Name": name,
        "Value": value,
        "Type": "String",
        "AllowedPattern": FLAG_ALLOWED_PATTERN,
        "Description": "Policy Gateway passthrough fallback: true or false",
    }


def parse_flag(value: str) -> bool | None:
    normalized = value.strip().lower()
    if normalized == "true":
        return True
    if normalized == "false":
        return False
    return None


class FallbackFlag:
    def __init__(self, parameter: str, reads: ParameterBatch) -> None:
        self.parameter = parameter
        self._use = reads.use(parameter, self._parse, self._off_on_error)

    def _parse(self, answer: VersionedParameter) -> bool:
        parsed = parse_flag(answer.value)
        if parsed is None:
            logger.warning(
                "fallback flag has an invalid value; treating it as off",
                extra={"parameter": self.parameter, "value_length": len(answer.value)},
            )
            return False
        return parsed

    def _off_on_error(self, exc: Exception, last: bool | None) -> bool:
        logger.warning(
            "fallback flag missing; treating it as off"
            if isinstance(exc, ParameterMissing)
            else "fallback flag unreadable; treating it as off",
            extra={"parameter": self.parameter, "error": type(exc).__name__},
        )
        return False

    async def enabled(self) -> bool:
        return await self._use.get()
