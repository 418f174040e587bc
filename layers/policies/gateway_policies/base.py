"""The policy interface: what a policy may see, change and refuse.

A policy is configured once (its options come from the chain JSON, validated
against the options type it declares, then `setup` runs) and then sees every
request that passes the gateway. Request hooks change the parsed request in
place; response hooks change the parsed response in place; stream hooks turn
each upstream event into zero or more events for the client.

Policies never import the gateway: everything they need arrives through these
types, so a policy can be unit-tested with nothing but this package.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Protocol,
    TypeVar,
    get_args,
    get_origin,
)

from typing_extensions import TypeVar as DefaultTypeVar

from .actions import PolicyAction
from .event_type import type_named, type_of
from .exceptions import PolicyConfigError
from .judge.record import JudgeCall

if TYPE_CHECKING:
    from pydantic import BaseModel

JSONObject = dict[str, Any]

HOOKS = ("on_request", "on_response", "on_stream_event", "on_stream_end", "on_upstream_error")


@dataclass(frozen=True)
class UpstreamErrorInfo:
    """The upstream's refusal of a request a policy changed, as `on_upstream_error` sees it.

    `message` is the upstream's text: it can repeat the client's words, so a
    policy may read it but never log it. Judge an error by `status` and
    `type`; the API may change which message a rule fires with.
    """

    status: int
    type: str
    message: str


def _compact(payload: JSONObject) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


class StreamEvent:
    """One server-sent event of a Messages stream: its name and its JSON data.

    What goes on the wire is always what the event holds now: an event no
    policy parsed is relayed byte for byte as the upstream sent it; once a
    policy has read `json`, the wire form is derived from that object when the
    event is encoded, so an edit made in place reaches the client exactly as
    a new event from `with_json` would. The name and the raw text are
    read-only.
    """

    __slots__ = ("_event", "_json", "_raw", "_raw_type", "_typed")

    def __init__(self, event: str, data: str) -> None:
        self._event = event
        self._raw: str | None = data
        self._json: JSONObject | None = None
        self._raw_type: str | None = None
        self._typed = False

    @classmethod
    def from_json(cls, event: str, payload: JSONObject) -> StreamEvent:
        made = cls.__new__(cls)
        made._event = event
        made._raw = None
        made._json = payload
        made._raw_type = None
        made._typed = False
        return made

    def with_json(self, payload: JSONObject) -> StreamEvent:
        """A new event of the same name carrying `payload`."""
        return StreamEvent.from_json(self._event, payload)

    @property
    def event(self) -> str:
        """The name its `event:` line gave; empty when the frame had none."""
        return self._event

    @property
    def json(self) -> JSONObject:
        """The data as a JSON object, parsed on first use; ValueError if it is not one.

        The object is the event's content: changing it changes what the client receives.
        """
        if self._json is None:
            loaded = json.loads(self._raw or "")
            if not isinstance(loaded, dict):
                raise ValueError("the event's data is not a JSON object")
            self._json = loaded
        return self._json

    @property
    def payload(self) -> JSONObject | None:
        """`json`, or None when the data is not a JSON object (nothing a policy can read)."""
        if self._json is None and not (self._raw or "").lstrip().startswith("{"):
            return None
        try:
            return self.json
        except ValueError:
            return None

    @property
    def type(self) -> str | None:
        """The `type` its data names, what the SDKs dispatch on; None when there is none.

        Judge an event by this, never by its name: a client acts on the data's
        `type` whatever the `event:` line said. An event nobody parsed is read
        here without being kept parsed, so it still goes out as the upstream's bytes.
        """
        if self._json is not None:
            return type_named(self._json)
        if not self._typed:
            self._raw_type = type_of(self._raw or "")
            self._typed = True
        return self._raw_type

    @property
    def data(self) -> str:
        """The data as it goes on the wire now."""
        if self._json is None:
            return self._raw or ""
        if self._raw is not None and json.loads(self._raw) == self._json:
            # Read but unchanged: the upstream's own bytes, not a re-serialization.
            return self._raw
        return _compact(self._json)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StreamEvent):
            return NotImplemented
        return self._event == other._event and self.data == other.data

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StreamEvent(event={self._event!r}, data={self.data!r})"


class TraceSpan(Protocol):
    """A span the gateway opened for a policy's own work (a judge call), under the call's."""

    def describe(self, key: str, value: str) -> None: ...

    def end(self, error: BaseException | None = None) -> None: ...


S = TypeVar("S")
# A policy's options type; a plain `Policy` is `Policy[None]`, whose options are None.
OptionsT = DefaultTypeVar("OptionsT", default=None)


@dataclass
class PolicyContext:
    """What a policy knows about the call it is looking at.

    `state(policy, Kind)` gives each policy a private `Kind()` that lives
    exactly as long as this call: where a stream policy keeps its buffers.
    """

    endpoint: str
    stream: bool
    call_id: str
    upstream_api_key: Callable[[], Awaitable[str | None]] | None = field(default=None, repr=False)
    """The gateway's own Anthropic API key, for a policy that calls Anthropic itself
    (tool_call_judge): read through the gateway's cached secret reader, with its TTL and
    its AWS timeouts. None where the gateway holds no key (Amazon Bedrock as the upstream)."""
    caller: str | None = None
    """Who is calling, as the gateway names it for the budget and the logs: the gateway
    key's name, `key:<hash>` of the forwarded credential, or the IAM role. Never a secret."""
    caller_groups: tuple[str, ...] = ()
    """The groups the caller belongs to (a gateway key's `"groups"`), in the listed order."""
    shadow: bool = False
    """True while a shadow-mode policy runs: what it records is what it would have done."""
    actions: list[PolicyAction] = field(default_factory=list, repr=False)
    """What the policies did on this call, in order (`record`): the audit trail."""
    deadline: float | None = None
    """`time.time()` by which the call must have answered (the Lambda's deadline less the
    gateway's margin); None when there is none. A policy that waits on a service (a judge)
    stops waiting before it."""
    upstream_base_url: str | None = None
    """The Messages API base the gateway relays to (`UPSTREAM_BASE_URL`); None when its
    upstream is not the Anthropic API. A judge's default `base_url`."""
    start_span: Callable[[str], TraceSpan] | None = field(default=None, repr=False)
    """Opens a span under the call's span (one per judge call); None when nothing traces."""
    judge_calls: list[JudgeCall] = field(default_factory=list, repr=False)
    """Every judge call a policy made on this call (gateway_policies.judge): the call line's
    `judge_usage` and the Judge* metrics."""
    _states: dict[int, Any] = field(default_factory=dict, repr=False)

    def replay(self) -> PolicyContext:
        """The same call again with no policy's state and no actions yet: to rerun its hooks."""
        return PolicyContext(
            self.endpoint,
            self.stream,
            self.call_id,
            self.upstream_api_key,
            caller=self.caller,
            caller_groups=self.caller_groups,
            shadow=self.shadow,
            deadline=self.deadline,
            upstream_base_url=self.upstream_base_url,
            start_span=self.start_span,
        )

    def record(self, policy: Policy[Any], action: str, **details: Any) -> None:
        """Record that `policy` took `action` on this call (one of `actions.ACTIONS`).

        `details` say what, for an auditor: kinds, counts, names, JSON paths; never
        content and never a secret (`redact_secrets` records `kind` and `count`). A name
        the client or the model chose is kept bounded (gateway_policies.recorder).
        """
        self.actions.append(PolicyAction(policy.label, action, details, self.shadow))

    def state(self, policy: object, kind: type[S]) -> S:
        """This call's `kind` instance for `policy` (or for any object a policy owns, such as
        its judge), made with `kind()` on first use."""
        found = self._states.get(id(policy))
        if found is None:
            found = self._states[id(policy)] = kind()
        if not isinstance(found, kind):
            label = getattr(policy, "label", type(policy).__name__)
            raise TypeError(f"{label} asked for its call state as two different types")
        return found


class Policy(Generic[OptionsT]):
    """Base class of every policy. Override only the hooks you need.

    Declare the options type once, as the type argument: `class P(Policy[POptions])`
    validates the chain JSON's `options` into `self.options` (a `POptions`, a
    subclass of gateway_policies.PolicyOptions); a plain `Policy` takes no
    options. pydantic is imported only by policies that take options, which
    keeps it off the gateway's cold path. Work that depends on the options alone
    (compiling patterns, say) goes in `setup`, which runs once per chain load.

    `bypassable` says whether the passthrough fallback may drop this policy's
    request changes when the chain's changes made the upstream reject a request.
    A policy whose changes protect something (redaction, say) sets it to False;
    then every fallback keeps its change: the original is resent with the
    request hooks of such policies run on it again (the narrow fallback).
    """

    name: ClassVar[str] = ""
    bypassable: ClassVar[bool] = True
    Options: ClassVar[type[BaseModel] | None] = None
    options: OptionsT

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Only this class's own bases: a subclass of a configured policy keeps
        # its parent's options type unless it declares another.
        for base in cls.__dict__.get("__orig_bases__", ()):
            origin = get_origin(base)
            if not (isinstance(origin, type) and issubclass(origin, Policy)):
                continue
            (argument,) = get_args(base)
            if isinstance(argument, TypeVar):
                continue  # a generic base of other policies, such as TextRewriter
            if not hasattr(argument, "model_validate"):
                raise TypeError(f"{cls.__name__}: Policy[...] takes a PolicyOptions subclass")
            cls.Options = argument

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        raw = dict(options or {})
        if self.Options is None:
            if raw:
                raise PolicyConfigError(f"{self.label} takes no options, got {sorted(raw)}")
            self.options = None  # type: ignore[assignment]
        else:
            self.options = self._validated(self.Options, raw)
        self.setup()

    def _validated(self, model: type[BaseModel], raw: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            # Locations and reasons only: an option's value may itself be a
            # secret (a string to redact), and config errors are logged.
            problems = "; ".join(
                f"{'.'.join(map(str, error['loc'])) or 'options'}: {error['msg']}"
                for error in exc.errors(include_input=False, include_url=False)
            )
            raise PolicyConfigError(f"{self.label}: invalid options: {problems}") from None

    def setup(self) -> None:
        """Prepare what every call needs from the options; raise PolicyConfigError to refuse."""

    @property
    def label(self) -> str:
        return self.name or type(self).__name__

    def implements(self, hook: str) -> bool:
        """Whether the chain should call `hook` (one of HOOKS): by default, if overridden."""
        return getattr(type(self), hook) is not getattr(Policy, hook)

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

    async def on_upstream_error(
        self, request: JSONObject, error: UpstreamErrorInfo, ctx: PolicyContext
    ) -> bool:
        """Repair `request` (what was sent) in place after the upstream refused it; True if changed.

        Called once, only on a request-shaped 4xx (400/404/413/422) of a request
        the chain changed, before anything was streamed. Change only what this
        policy changed itself, keeping its intent, and never undo another
        policy's change: the gateway sends the result once more (a repair, no
        flag needed) and records it. Return False to leave the request alone.
        """
        return False
