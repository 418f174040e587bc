"""The policy document's `record` option: whose calls are recorded.

`"record": {"enabled": true}` at the top of the document (the default) or in a
`"callers"` entry beside its `"policies"` (a caller's or a group's own); off
unless said. A call's option resolves as its chain does (runtime/document.py):
its caller's entry, else its first group's entry that says, else the default.
It is read with the document, so it is live with the document's TTL, and a
document that enables recording where no store is configured (neither
RECORDS_BUCKET nor RECORDS_DIR) is refused at load like any invalid chain: the
last good document keeps serving, rather than calls an operator wants kept
going unrecorded without a word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway_policies import PolicyConfigError
from gateway_policies.runtime.document import read_per_caller, resolve_for

KEY = "record"
_OPTIONS = frozenset({"enabled"})
NO_STORE = (
    "turns recording on, but the gateway has no record store: set RECORDS_BUCKET "
    "(an S3 bucket) or RECORDS_DIR (a folder)"
)


@dataclass(frozen=True)
class RecordOption:
    """Who is recorded under one document."""

    default: bool = False
    callers: Mapping[str, bool] = field(default_factory=dict)
    groups: Mapping[str, bool] = field(default_factory=dict)

    @property
    def anyone(self) -> bool:
        return self.default or any(self.callers.values()) or any(self.groups.values())

    def enabled(self, caller: str | None, groups: Sequence[str] = ()) -> bool:
        return resolve_for(caller, groups, self.callers, self.groups, self.default)


def parse(document: Mapping[str, Any], store_configured: bool) -> RecordOption:
    """The document's option; PolicyConfigError for a malformed one, or for one that
    records anyone while `store_configured` is False."""
    default = _enabled(document.get(KEY), KEY)
    callers, groups = read_per_caller(document, KEY, _enabled)
    option = RecordOption(default, callers, groups)
    if option.anyone and not store_configured:
        raise PolicyConfigError(f"{KEY} {NO_STORE}")
    return option


def _enabled(value: object, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, Mapping) or set(value) - _OPTIONS:
        raise PolicyConfigError(f'{where} must be an object {{"enabled": true|false}}')
    enabled = value.get("enabled", False)
    if not isinstance(enabled, bool):
        raise PolicyConfigError(f"{where}.enabled must be true or false")
    return enabled
