"""The policy interface: what a policy may see, change and refuse.

A policy is configured once (its options come from the chain JSON) and then
sees every request that passes the gateway. Request hooks change the parsed
request in place; response hooks change the parsed response in place; stream
hooks turn each upstream event into zero or more events for the client.

Policies never import the gateway: everything they need arrives through these
types, so a policy can be unit-tested with nothing but this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

JSONObject = dict[str, Any]


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


class PolicyConfigError(ValueError):
    """A policy chain or a policy's options cannot be used."""


@dataclass
class StreamEvent:
    """One server-sent event of a Messages stream.

    `data` is kept as the upstream's raw text so an event no policy touches is
    relayed byte for byte; `json` parses it on first use.
    """

    event: str
    data: str
    _parsed: JSONObject | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, event: str, payload: JSONObject) -> StreamEvent:
        return cls(event, json.dumps(payload, ensure_ascii=False, separators=(",", ":")), payload)

    @property
    def json(self) -> JSONObject:
        if self._parsed is None:
            loaded = json.loads(self.data)
            self._parsed = loaded if isinstance(loaded, dict) else {"value": loaded}
        return self._parsed


@dataclass
class PolicyContext:
    """What a policy knows about the call it is looking at.

    `state(policy)` gives each policy a private dict that lives exactly as long
    as this call, which is where a stream policy keeps its buffers.
    """

    endpoint: str
    stream: bool
    call_id: str
    _states: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)

    def state(self, policy: Policy) -> dict[str, Any]:
        return self._states.setdefault(id(policy), {})


class Policy:
    """Base class of every policy. Override only the hooks you need.

    `bypassable` says whether the passthrough fallback may resend the original
    request when this policy's changes made the upstream reject it. A policy
    whose changes protect something (redaction, say) sets it to False; then
    the fallback never fires while the policy is in the chain.

    `Options`, when set, is a pydantic model that validates the `options`
    object of the chain JSON.
    """

    name: ClassVar[str] = ""
    bypassable: ClassVar[bool] = True
    Options: ClassVar[Any] = None

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        raw = dict(options or {})
        if self.Options is None:
            if raw:
                raise PolicyConfigError(f"{self.label} takes no options, got {sorted(raw)}")
            self.options: Any = None
            return
        from pydantic import ValidationError

        try:
            self.options = self.Options.model_validate(raw)
        except ValidationError as exc:
            # Locations and reasons only: an option's value may itself be a
            # secret (a string to redact), and config errors are logged.
            problems = "; ".join(
                f"{'.'.join(map(str, error['loc'])) or 'options'}: {error['msg']}"
                for error in exc.errors(include_input=False, include_url=False)
            )
            raise PolicyConfigError(f"{self.label}: invalid options: {problems}") from None

    @property
    def label(self) -> str:
        return self.name or type(self).__name__

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        """Change the request in place, or raise PolicyViolation.

        Keep it deterministic and free of side effects: when a fallback fires,
        the gateway runs the request hooks again on a fresh copy of the
        original to attribute each changed JSON path to its policy.
        """

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        """Change a non-streaming response in place, or raise PolicyViolation."""

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        """Return the events that replace `event` for the client (often `[event]`)."""
        return [event]

    async def on_stream_end(self, ctx: PolicyContext) -> list[StreamEvent]:
        """Return events still owed to the client when the upstream stream ends."""
        return []


def overrides(policy: Policy, hook: str) -> bool:
    """Whether `policy` implements `hook` itself, so the chain can skip no-op hooks."""
    return getattr(type(policy), hook) is not getattr(Policy, hook)
