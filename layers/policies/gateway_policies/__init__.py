"""Policy Gateway's policies: the author's API, the built-in policies, and the runtime.

The author's API is this package's top level: `base` (Policy, PolicyContext,
StreamEvent), `actions` (what a policy records for the audit), `options`
(PolicyOptions), `text` (TextRewriter), `tool_gate` (ToolCallGate),
`tool_input` (canonical_input), `numbers`, `exceptions`, and `testing` (a
policy's unit tests).
`builtin/` holds the built-in policies, written against that API like any
other. `runtime/` is what runs policies in the gateway: the chain, the loader,
the diff the fallback records, and the SSE codec.

Everything a policy author needs is importable from here. `PolicyOptions`
loads pydantic, so it is imported on first use: a gateway whose chain takes
no options never pays for pydantic at cold start.
"""

from typing import TYPE_CHECKING, Any

from .actions import ACTIONS, PolicyAction
from .base import JSONObject, Policy, PolicyContext, StreamEvent, UpstreamErrorInfo
from .exceptions import PolicyConfigError, PolicyFailure, PolicyViolation
from .runtime.chain import PolicyChain
from .runtime.document import PolicyDocument
from .runtime.loader import BUILTIN_POLICIES, load_chain, load_document
from .slots import response_text_slots, text_slots
from .text import TextRewriter, rewrite_text, subn_in_windows
from .tool_gate import ToolCallGate
from .tool_input import canonical_input

if TYPE_CHECKING:
    from .options import PolicyOptions

__all__ = [
    "ACTIONS",
    "BUILTIN_POLICIES",
    "JSONObject",
    "Policy",
    "PolicyAction",
    "PolicyChain",
    "PolicyConfigError",
    "PolicyContext",
    "PolicyDocument",
    "PolicyFailure",
    "PolicyOptions",
    "PolicyViolation",
    "StreamEvent",
    "TextRewriter",
    "ToolCallGate",
    "UpstreamErrorInfo",
    "canonical_input",
    "load_chain",
    "load_document",
    "response_text_slots",
    "rewrite_text",
    "subn_in_windows",
    "text_slots",
]


def __getattr__(name: str) -> Any:
    if name == "PolicyOptions":
        from .options import PolicyOptions

        return PolicyOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
