"""Who runs the judge model: the interface a provider implements, and the known ones.

A provider takes a built `JudgeRequest` (the Messages API's terms) to its
model and returns the Messages API's answer as JSON. It never reads the
verdict (the core does, verdict.py) and never decides anything: it translates
its own failures (status, transport, credentials) into `JudgeError` in one
place. The core bounds every call with its own timeout as well.

Providers are named in providers.PROVIDERS and imported on first use, so a chain that
judges with one never imports another.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .providers import PROVIDERS

if TYPE_CHECKING:
    from ..base import PolicyContext
    from .options import JudgeOptions
    from .prompt import JudgeRequest


class JudgeProvider(ABC):
    """Carries judge requests to one model service. One instance per judging policy."""

    name: ClassVar[str] = ""

    def __init__(self, options: JudgeOptions) -> None:
        self.options = options

    @abstractmethod
    async def send(
        self, request: JudgeRequest, ctx: PolicyContext, seconds: float
    ) -> Mapping[str, Any]:
        """The Messages API answer to `request` as JSON (`content`, `usage`), within
        `seconds`; JudgeError for anything else. Its message never holds content."""

    async def aclose(self) -> None:  # noqa: B027 (a provider holding none has none to close)
        """Close the connections held for the running event loop: for a harness whose loop
        ends (`judge eval`, tests); a serving gateway keeps them for its loop's life."""


def provider_for(options: JudgeOptions) -> JudgeProvider:
    """The provider `options.provider` names, built for these options."""
    module_name, _, class_name = PROVIDERS[options.provider].partition(":")
    found = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(found, type) and issubclass(found, JudgeProvider)):
        raise TypeError(f"{PROVIDERS[options.provider]} is not a JudgeProvider")
    return found(options)


def usage_of(answer: Mapping[str, Any]) -> tuple[int, int]:
    """The answer's (input_tokens, output_tokens), 0 for what it does not say."""
    usage = answer.get("usage")
    if not isinstance(usage, dict):
        return 0, 0

    def count(name: str) -> int:
        value = usage.get(name)
        return value if type(value) is int and value >= 0 else 0

    return count("input_tokens"), count("output_tokens")
