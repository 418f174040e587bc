"""Policy Gateway's policies: the interface, the chain and the built-in policies.

Everything a policy author needs is importable from here. `PolicyOptions`
loads pydantic, so it is imported on first use: a gateway whose chain takes
no options never pays for pydantic at cold start.
"""

from typing import TYPE_CHECKING, Any

from .base import (
    JSONObject,
    Policy,
    PolicyConfigError,
    PolicyContext,
    PolicyViolation,
    StreamEvent,
)
from .runtime.chain import PolicyChain, PolicyFailure
from .runtime.loader import BUILTIN_POLICIES, load_chain
from .text import TextRewriter, response_text_slots, rewrite_text, text_slots
from .tool_gate import ToolCallGate, canonical_input

if TYPE_CHECKING:
    from .options import PolicyOptions

__all__ = [
    "BUILTIN_POLICIES",
    "JSONObject",
    "Policy",
    "PolicyChain",
    "PolicyConfigError",
    "PolicyContext",
    "PolicyFailure",
    "PolicyOptions",
    "PolicyViolation",
    "StreamEvent",
    "TextRewriter",
    "ToolCallGate",
    "canonical_input",
    "load_chain",
    "response_text_slots",
    "rewrite_text",
    "text_slots",
]


def __getattr__(name: str) -> Any:
    if name == "PolicyOptions":
        from .options import PolicyOptions

        return PolicyOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
