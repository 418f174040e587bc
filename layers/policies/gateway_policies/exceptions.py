"""Every exception a policy raises or the runtime reports, in one place.

A policy raises PolicyViolation to refuse, and PolicyConfigError when its
options cannot be used; the runtime wraps anything else a policy raises in
PolicyFailure. All three are importable from `gateway_policies`.
"""

from __future__ import annotations


class PolicyViolation(Exception):
    """Raised by a policy to refuse a request or a response outright.

    The client receives an Anthropic-shaped error with this status and type.
    A violation is a decision, not a failure: it is never retried and the
    passthrough fallback never overrides it.
    """

    def __init__(
        self, message: str, *, status: int = 403, error_type: str = "permission_error"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type
        self.policy: str | None = None
        """The refusing policy's name, set by the chain that ran it (for the audit trail)."""


class PolicyConfigError(ValueError):
    """A policy chain or a policy's options cannot be used."""


class PolicyFailure(Exception):
    """A policy raised something other than PolicyViolation: a bug, not a decision.

    The gateway fails the call closed. `policy` names the culprit; the original
    exception is the cause, kept out of the client's view.
    """

    def __init__(self, policy: str, hook: str) -> None:
        super().__init__(f"policy {policy!r} failed in {hook}")
        self.policy = policy
        self.hook = hook
