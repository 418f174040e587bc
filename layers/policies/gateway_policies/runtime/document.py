"""The policy document: the default chain and the chains of named callers and groups.

`{"policies": [...], "callers": {"<caller>": {"policies": [...]}, "group:<g>": {...}}}`.
A call uses the chain of its exact caller, else of its first listed group that
has one, else the default. The whole document loads or none of it does, so a
bad chain for one caller never leaves others on a half-updated document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .chain import PolicyChain

GROUP_PREFIX = "group:"


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
        if caller is not None and caller in self.callers:
            return self.callers[caller]
        for group in groups:
            if group in self.groups:
                return self.groups[group]
        return self.default
