"""One call's state, from its request to its log line, and the answers the gateway gives itself.

Every stage of a call (auth, the body, the chain, the upstream attempts, the
relay back) reads what it needs from the one `Call` and records what it did
there, so the endpoint can write the call's log line and metrics at the end
whatever happened. It is Starlette's per-response object pattern: state as
attributes of a small object, never closures sharing `nonlocal`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gateway_policies import PolicyAction, PolicyContext, recorder
from gateway_policies.judge.record import JudgeCall
from starlette.types import Scope, Send

from .auth.authenticator import Credentials
from .lambda_context import InvocationContext

if TYPE_CHECKING:
    from .limits.admission import CallLimits

_JSON = [(b"content-type", b"application/json")]
DEADLINE_ERROR = (504, "The gateway ended the call before its Lambda deadline.", "timeout_error")

# What `Call.fallback` says on the log line.
FALLBACK_NONE = "none"
FALLBACK_DENIED = "denied"
FALLBACK_RETRYING = "retrying"
FALLBACK_SUCCEEDED = "succeeded"
FALLBACK_FAILED = "failed"


# The token counts the API reports in `usage`, as the call's log line names them.
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
# The call line's `model` when one call's answers came from several models (batch results).
MODEL_MIXED = "mixed"


class Recording(Protocol):
    """A recorded call's answer as the client receives it, then stored (records/writer.py)."""

    def answered_json(self, status: int, body: bytes) -> None: ...

    def streamed(self, body: bytes) -> None: ...

    async def store(self, call: Call) -> None:
        """Store the call's record; never raises."""
        ...


@dataclass
class Usage:
    """The tokens the upstream reported for a call, per model it answered with.

    A Messages call has one answer; a batch's results file has one per
    succeeded entry, and the call line carries their sum.
    """

    by_model: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, model: str, counts: Mapping[str, int]) -> None:
        # The model is the upstream's word (a client's, echoed): kept bounded for the
        # call line and the metrics' model dimension alike.
        totals = self.by_model.setdefault(recorder.text(model), dict.fromkeys(TOKEN_FIELDS, 0))
        for name in TOKEN_FIELDS:
            totals[name] += counts.get(name, 0)

    def fields(self) -> dict[str, Any]:
        """The call line's `model` and token fields (empty when no answer reported usage)."""
        if not self.by_model:
            return {}
        models = list(self.by_model)
        line: dict[str, Any] = {"model": models[0] if len(models) == 1 else MODEL_MIXED}
        for name in TOKEN_FIELDS:
            line[name] = sum(counts[name] for counts in self.by_model.values())
        return line


@dataclass
class Call:
    """One call: what arrived, where its answer goes, and what its log line will say."""

    call_id: str
    endpoint: str
    scope: Scope = field(repr=False)
    send: Send = field(repr=False)
    invocation: InvocationContext
    deadline: float | None
    """time.time() by which the call must have answered (the Lambda deadline less the margin)."""
    credentials: Credentials = field(default_factory=lambda: Credentials(None, ()), repr=False)
    """Set once the call is authorized; until then, none."""
    forwarded: list[tuple[str, str]] = field(default_factory=list, repr=False)
    """Every header the upstream gets (headers.forwarded_headers), once authorized."""
    original: bytes = field(default=b"", repr=False)
    """The body exactly as it arrived: what the passthrough fallback resends."""
    started: float = field(default_factory=time.perf_counter)
    status: int = 0
    stream: bool = False
    attempts: int = 0
    fallback: str = FALLBACK_NONE
    disconnected: bool = False
    stream_error: str | None = None
    """The `error` event a committed stream ended with (the upstream's or the gateway's):
    its type, and `status` is the status it stands for, whatever happens after."""
    caller: str | None = None
    caller_groups: tuple[str, ...] = ()
    """The caller's groups (a gateway key's `"groups"`): which per-caller chain applies."""
    chain: str | None = None
    """Which chain of the policy document the call used: "default", a caller, "group:<g>"."""
    upstream_request_id: str | None = None
    contexts: list[PolicyContext] = field(default_factory=list, repr=False)
    """Every policy context the call ran the chain with (request, answer, batch entries)."""
    chain_version: str | None = None
    """The version of the policy chain that decided (policy_source.py)."""
    usage: Usage = field(default_factory=Usage)
    limits: CallLimits | None = field(default=None, repr=False)
    """Set once the call is counted under limits (limits/limiter.py)."""
    trace_id: str | None = None
    sent: bytes | None = field(default=None, repr=False)
    """The body of the upstream attempt that answered, exactly as it was sent."""
    recording: Recording | None = field(default=None, repr=False)
    """Set when the call's caller is recorded (records/): what the client receives."""

    def policy_actions(self) -> list[PolicyAction]:
        """What the policies did on this call, in the order they did it, every context's."""
        return [action for ctx in self.contexts for action in ctx.actions]

    def judge_calls(self) -> list[JudgeCall]:
        """Every judge call the policies made on this call, every context's."""
        return [judged for ctx in self.contexts for judged in ctx.judge_calls]

    def end_stream_with(self, error_type: str, status: int) -> None:
        """Note that the stream ends with an `error` event, unless the client left first:
        the call line says what happened first."""
        if self.stream_error is None and not self.disconnected:
            self.stream_error = error_type
            self.status = status

    def seconds_left(self) -> float | None:
        return seconds_until(self.deadline)

    async def respond(
        self, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        """The whole answer at once, as JSON: an error, or a body read in full."""
        self.status = status
        length = [(b"content-length", str(len(body)).encode())]
        if self.recording is not None:
            self.recording.answered_json(status, body)
            if self.invocation.request_id is not None:
                # Behind the Lambda Web Adapter a response with a length ends the
                # invocation with its last byte; without one it ends with `end_body`,
                # after the record is stored (records/writer.py).
                length = []
        await self.send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*merge_headers(headers or [], _JSON), *length],
            }
        )
        if self.recording is None:
            await self.send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await self.send({"type": "http.response.body", "body": body, "more_body": True})
        await self.end_body()

    async def end_body(self) -> None:
        """End a response whose every byte was sent: a recorded call's record is stored
        first, so the client never waits for it and the invocation cannot end before it."""
        if self.recording is not None:
            await self.recording.store(self)
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})


def seconds_until(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.time()


def merge_headers(
    upstream: list[tuple[bytes, bytes]], ours: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    replaced = {key for key, _ in ours}
    return [item for item in upstream if item[0] not in replaced] + ours
