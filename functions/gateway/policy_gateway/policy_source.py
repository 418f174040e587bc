"""Where the active policy document comes from, and what happens when it is broken.

The document (the default chain and any per-caller chains, runtime/document.py)
is JSON read from the SSM parameter named by POLICY_CONFIG_PARAMETER
(live: re-read with the flag, in one GetParameters call, ahead of each TTL's
end: see `parameters.TTLCache`) or from inline POLICY_CONFIG; the parameter wins.
A bad config never takes the gateway down: the last good chain keeps serving,
the error is logged and counted; so does an SSM that errors or stalls (see
`parameters.TTLCache`), since the last good chain is still the operator's. With
no good chain ever loaded, requests fail closed: running without the
operator's policies would silently weaken them.

Each document has one version, whatever chain of it a call uses, which every
call line carries (`chain_version`, beside `chain`, the chain used):
`v<SSM parameter version>:<hash>.r<rules>` from SSM, `inline:<hash>.r<rules>`
from POLICY_CONFIG, `none` without either; the hash is the first 8 hex digits
of the SHA-256 of the document's text, `<rules>` the detector's rule-set
version (its first 8 hex digits): a new rule catalogue is a new chain version,
since the same chain now redacts other text. Each load logs `policy chain loaded` once
(the default chain's enforced policy names, its shadow-mode ones, the keys of
its `callers` chains and, by key, the shadow-mode policies of those that have
any): at start, on a live change (a new version, not every re-read of the same
one), and each time a bad config leaves the last good document in force. In
`serve` the re-read runs without calls too (`keep_fresh`), so the line of a
change appears within the TTL whether or not calls arrive.

Each call that uses a chain from SSM records ChainVersionAge: how long ago
the version in force was written. Its maximum over the environments falls
once every one of them runs the newest version, which is how an operator
watches a change propagate.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway_policies import PolicyConfigError, PolicyDocument, load_document
from gateway_policies.detect import catalogue_version

from . import names
from .aws_reads import VersionedParameter
from .errors import GatewayError
from .limits import config as limits_config
from .observability import metrics
from .observability.logs import logger
from .parameter_batch import ParameterBatch, ParameterUse
from .records import option
from .records.option import RecordOption

NO_CHAIN_MESSAGE = (
    "The gateway has no valid policy configuration, so it refuses requests until an "
    "operator fixes it."
)
NO_CONFIG_VERSION = "none"
# The document of no policies: what `policy-gateway init` writes, and the local run's
# chain when POLICY_CONFIG is unset.
EMPTY_POLICY_CHAIN = '{"policies": []}'


@dataclass(frozen=True)
class LoadedDocument:
    """A policy document (every chain of it) and the version of the text it was built from."""

    document: PolicyDocument
    version: str
    written: float | None = None
    """When the SSM parameter's version was written (epoch seconds); None for inline text."""
    limits: limits_config.LimitsConfig = limits_config.NO_LIMITS_CONFIG
    """The document's limits (limits/config.py), validated with its chains."""
    record: RecordOption = field(default_factory=RecordOption)
    """Whose calls are recorded (records/option.py)."""


def chain_version(text: str, parameter_version: int | None) -> str:
    digest = f"{hashlib.sha256(text.encode()).hexdigest()[:8]}.r{catalogue_version()[:8]}"
    return f"inline:{digest}" if parameter_version is None else f"v{parameter_version}:{digest}"


class PolicySource:
    """The document in force: the parameter's, read by `reads`, else the inline one.

    `now` (epoch seconds) dates the version in force for ChainVersionAge;
    `records_configured` says whether a document may turn recording on.
    """

    def __init__(
        self,
        inline: str | None,
        parameter: str | None,
        reads: ParameterBatch | None = None,
        now: Callable[[], float] = time.time,
        limits_store: str = "process",
        records_configured: bool = False,
    ) -> None:
        self._parameter = parameter
        self._limits_store = limits_store
        self._records_configured = records_configured
        self._now = now
        self._static: LoadedDocument | None = None
        self._use: ParameterUse[LoadedDocument | None] | None = None
        self._reads = reads
        self._logged: str | None = None
        self.version: str | None = None
        """The version of the document in force now, None before one loaded."""
        if parameter:
            assert reads is not None, "a chain parameter is read with the others"
            self._use = reads.use(parameter, self._load_parameter, self._keep_last_good)
        elif inline:
            try:
                self._static = self._loaded(*self._parsed(inline), chain_version(inline, None))
            except PolicyConfigError as exc:
                logger.error("inline policy config is invalid", extra={"error": str(exc)})
        else:
            self._static = self._loaded(
                PolicyDocument(), limits_config.NO_LIMITS_CONFIG, RecordOption(), NO_CONFIG_VERSION
            )

    def _load_parameter(self, read: VersionedParameter) -> LoadedDocument | None:
        return self._loaded(
            *self._parsed(read.value), chain_version(read.value, read.version), read.modified
        )

    def _parsed(self, text: str) -> tuple[PolicyDocument, limits_config.LimitsConfig, RecordOption]:
        """The document's chains, its limits and its `record` option: all valid, or
        PolicyConfigError for the whole."""
        document = load_document(text)
        record = option.parse(json.loads(text), self._records_configured)
        return document, limits_config.parse(text), record

    def _loaded(
        self,
        document: PolicyDocument,
        limits: limits_config.LimitsConfig,
        record: RecordOption,
        version: str,
        written: float | None = None,
        *,
        kept: bool = False,
    ) -> LoadedDocument:
        """Log the load when it is news: a new version, or the last good one kept."""
        self.version = version
        if kept or version != self._logged:
            self._logged = version
            logger.info(
                names.LOG_POLICY_CHAIN_LOADED,
                extra={
                    "chain_version": version,
                    "policies": document.default.names,
                    "shadow": document.default.shadow.names,
                    "callers": document.caller_keys,
                    "caller_shadow": caller_shadow(document),
                    "parameter": self._parameter,
                    "kept_last_good": kept,
                    **limits_config.load_fields(limits, self._limits_store),
                },
            )
        return LoadedDocument(document, version, written, limits, record)

    def _keep_last_good(self, exc: Exception, last: LoadedDocument | None) -> LoadedDocument | None:
        metrics.count(names.METRIC_POLICY_CONFIG_ERRORS)
        logger.error(
            names.LOG_POLICY_CONFIG_KEPT_LAST_GOOD
            if last is not None
            else names.LOG_POLICY_CONFIG_FAILING_CLOSED,
            extra={
                "parameter": self._parameter,
                "error_type": type(exc).__name__,
                "error": str(exc) if isinstance(exc, PolicyConfigError) else "",
            },
        )
        if last is None:
            return None
        return self._loaded(
            last.document, last.limits, last.record, last.version, last.written, kept=True
        )

    async def current(self) -> LoadedDocument | None:
        """The document in force and its version, None when no good one was ever loaded."""
        return await self._use.get() if self._use is not None else self._static

    async def keep_fresh(self) -> None:
        """Re-read the parameter (and the flag with it) ahead of each TTL's end, without
        calls, until cancelled; returns at once for an inline chain, which never changes."""
        if self._reads is not None and self._use is not None:
            await self._reads.keep_fresh()

    async def load(self) -> PolicyDocument | None:
        """The document in force, None when no good one was ever loaded."""
        loaded = await self.current()
        return None if loaded is None else loaded.document

    async def loaded(self) -> LoadedDocument:
        """The document in force and its version; a 500 when no good one was ever loaded
        (a call's chain is the document's `resolve`: see Gateway.chain)."""
        loaded = await self.current()
        if loaded is None:
            # A fresh error per call: a shared instance would keep every raise's frames.
            raise GatewayError(500, NO_CHAIN_MESSAGE, "api_error")
        if loaded.written is not None:
            metrics.seconds(names.METRIC_CHAIN_VERSION_AGE, max(0.0, self._now() - loaded.written))
        return loaded


def caller_shadow(document: PolicyDocument) -> dict[str, list[str]]:
    """The shadow-mode policies of each `callers` chain that has any, by its key."""
    chains = [*document.callers.values(), *document.groups.values()]
    return {
        key: chain.shadow.names
        for key, chain in zip(document.caller_keys, chains, strict=True)
        if chain.shadow.names
    }
