"""Policy Gateway's policies: the interface, the chain and the built-in policies."""

from .base import (
    JSONObject,
    Policy,
    PolicyConfigError,
    PolicyContext,
    PolicyViolation,
    StreamEvent,
)
from .chain import PolicyChain, PolicyFailure
from .loader import BUILTIN_POLICIES, load_chain

__all__ = [
    "BUILTIN_POLICIES",
    "JSONObject",
    "Policy",
    "PolicyChain",
    "PolicyConfigError",
    "PolicyContext",
    "PolicyFailure",
    "PolicyViolation",
    "StreamEvent",
    "load_chain",
]
