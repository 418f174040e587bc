"""The policy document: the default chain and the chains of named callers and groups.

`{"policies": [...], "callers": {"<caller>": {"policies": [...]}, "group:<g>": {...}}}`.
A call uses the chain of its exact caller, else of its first listed group that
has one, else the default. The whole document loads or none of it does, so a
bad chain for one caller never leaves others on a half-updated document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .chain import PolicyChain

GROUP_PREFIX = "group:"

T = TypeVar("T")


def resolve_for(
    caller: str | None,
    groups: Sequence[str],
    own: Mapping[str, T],
    by_group: Mapping[str, T],
    default: T,
) -> T:
    """What a document sets for `caller`: its own, else its first group's, else the default.

    One rule for everything a document sets per caller (its chain here; the gateway's
    `limits` and `record` beside it), so a caller never gets one group's chain and another's
    limits."""
    if caller is not None and caller in own:
        return own[caller]
    for group in groups:
        if group in by_group:
            return by_group[group]
    return default


def read_per_caller(
    document: Mapping[str, Any], key: str, read: Callable[[Any, str], T]
) -> tuple[dict[str, T], dict[str, T]]:
    """`key` in each `callers` entry that sets it, read by `read(value, where)`: by caller
    name, and by group name (without its prefix)."""
    callers: dict[str, T] = {}
    groups: dict[str, T] = {}
    entries = document.get("callers")
    if isinstance(entries, Mapping):
        for name, entry in entries.items():
            if not isinstance(entry, Mapping) or key not in entry:
                continue
            value = read(entry[key], f"callers[{name!r}].{key}")
            if name.startswith(GROUP_PREFIX):
                groups[name[len(GROUP_PREFIX) :]] = value
            else:
                callers[name] = value
    return callers, groups


@dataclass(frozen=True)
class PolicyDocument:
    """Every chain one document configures; `resolve` picks a call's."""

    default: PolicyChain = field(default_factory=PolicyChain)
    callers: Mapping[str, PolicyChain] = field(default_factory=dict)
    """By caller name (a gateway key's name, `key:<hash>`, an IAM role)."""
    groups: Mapping[str, PolicyChain] = field(default_factory=dict)
    """By group name, without the `group:` prefix."""

    @property
    def chains(self) -> list[PolicyChain]:
        return [self.default, *self.callers.values(), *self.groups.values()]

    @property
    def caller_keys(self) -> list[str]:
        """The keys of the document's `callers`: caller names, then `group:<g>`s."""
        return [*self.callers, *(GROUP_PREFIX + group for group in self.groups)]

    def resolve(self, caller: str | None, groups: Sequence[str] = ()) -> PolicyChain:
        """The chain for `caller`: its own, else its first group's with one, else the default."""
        return resolve_for(caller, groups, self.callers, self.groups, self.default)
