"""The answer to a streaming call: upstream SSE → stream policies → client, frame by frame.

The stream commits (200 and the SSE headers go out) with the first event that
reaches the client, never before: until then any failure is answered with its
real status and an Anthropic-shaped JSON body, exactly as direct access would.
After the commit a failure can only be one `event: error` frame, as the API
sends one.
`StreamRelay._fail` is that one decision.

Three upstream faults are failures too, never relayed as they came. A frame
whose `event:` name is missing or differs from its data's `type`: the SDKs
act on the data's `type` (and skip a frame with no name), so such a frame
means one thing to the policies and another to the client. An event out of
the order the SDKs assemble a message by (gateway_policies.runtime.stream_grammar):
a policy judging events one by one would judge another message than the
client's. Both are checked on every stream, policies or none. And a stream
that ends before `message_stop` (or an `error` event): the client must not
take a cut-short message for a finished one.
"""

from __future__ import annotations

import time

import anyio
from gateway_policies import PolicyChain, PolicyContext, PolicyFailure, PolicyViolation, StreamEvent
from gateway_policies.runtime.sse import EventTooLarge, SSEDecoder, encode_many
from gateway_policies.runtime.stream_grammar import GrammarError, StreamGrammar

from .. import names, settings
from ..call import DEADLINE_ERROR, Call, merge_headers
from ..errors import GatewayError, error_body, status_of_type
from ..observability import metrics
from ..observability.logs import logger
from ..upstream.client import UpstreamResponse
from ..upstream.errors import UpstreamUnavailable
from .chunks import coalesced
from .refusal import policy_error
from .usage import USAGE_EVENTS, StreamUsage

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]
UNREADABLE = (
    502,
    "The upstream answered in a form the gateway's response policies cannot read.",
    "api_error",
)
MISLABELLED = (
    502,
    "The upstream sent a stream event whose name is missing or is not its data's type.",
    "api_error",
)
CUT_SHORT = (502, "The upstream stream ended before its message did.", "api_error")


def watched(chain: PolicyChain) -> bool:
    """Whether policies read answers, so an answer they cannot read fails the call closed."""
    return chain.has_response_hooks or chain.filters_stream


class StreamRelay:
    """One upstream stream on its way to the client; its progress is the attributes."""

    def __init__(
        self,
        upstream: UpstreamResponse,
        chain: PolicyChain,
        ctx: PolicyContext,
        call: Call,
        max_event_bytes: int,
    ) -> None:
        self.upstream = upstream
        self.chain = chain
        self.ctx = ctx
        self.call = call
        self.committed = False
        self.grammar = StreamGrammar()
        self.decoder = SSEDecoder(max_event_bytes)
        self.usage = StreamUsage()

    async def run(self) -> None:
        upstream = self.upstream
        if watched(self.chain) and not _is_event_stream(upstream.headers):
            await upstream.close()
            upstream.span.end()
            raise GatewayError(*UNREADABLE)
        failure: GatewayError | None = None
        try:
            with anyio.move_on_after(self.call.seconds_left()) as budget:
                try:
                    await self._pump()
                except (PolicyViolation, PolicyFailure) as exc:
                    failure = policy_error(exc, self.ctx)
                except GatewayError as exc:
                    logger.warning("upstream stream refused", extra={"reason": exc.message})
                    failure = exc
                except OSError:
                    self.call.disconnected = True
                    return
                except UpstreamUnavailable as exc:
                    failure = (
                        GatewayError(504, "The upstream stream stalled.", "timeout_error")
                        if exc.timeout
                        else GatewayError(502, "The upstream stream ended unexpectedly.")
                    )
                except Exception as exc:
                    logger.warning(
                        "upstream stream failed", extra={"error_type": type(exc).__name__}
                    )
                    failure = GatewayError(502, "The upstream stream ended unexpectedly.")
            if budget.cancelled_caught:
                failure = GatewayError(*DEADLINE_ERROR)
        finally:
            await upstream.close()
            upstream.span.end()
            self.usage.report(self.call.usage)
        if failure is not None:
            await self._fail(failure)
        if self.committed:
            await self.call.end_body()

    async def _pump(self) -> None:
        try:
            async with coalesced(self.upstream.chunks()) as chunks:
                async for chunk in chunks:
                    events = self.decoder.feed(chunk)
                    if events:
                        await self._admit(events)
        except EventTooLarge as exc:
            raise GatewayError(
                502,
                f"The upstream sent a stream event larger than the gateway's limit of "
                f"{exc.limit} bytes ({settings.ENV_UPSTREAM_MAX_ANSWER_BYTES}).",
                "api_error",
            ) from None
        last = self.decoder.flush()
        if last:
            await self._admit(last)
        if not self.grammar.ended:
            raise GatewayError(*CUT_SHORT)
        if self.chain.reads_stream:
            await self._deliver(await self.chain.apply_stream_end(self.ctx))
        if not self.committed:
            raise GatewayError(502, "No event of the upstream stream was left to relay.")

    async def _admit(self, events: list[StreamEvent]) -> None:
        """Emit `events` up to the first the client must not see, then refuse."""
        for position, event in enumerate(events):
            try:
                kind = self._checked(event)
            except GatewayError:
                if position:
                    await self._emit(events[:position])
                raise
            if kind in USAGE_EVENTS:
                self.usage.see(event, kind)
            elif kind == "error":
                error_type = _error_type(event)
                self.call.end_stream_with(error_type, status_of_type(error_type))
        await self._emit(events)

    def _checked(self, event: StreamEvent) -> str:
        """The type `event`'s data names, once its name and its place in the stream agree."""
        kind = event.type
        if not kind or kind != event.event:
            raise GatewayError(*MISLABELLED)
        try:
            self.grammar.check(event, kind)
        except GrammarError as exc:
            raise GatewayError(
                502, f"The upstream stream broke the order of a Messages stream: {exc}."
            ) from None
        return kind

    async def _emit(self, events: list[StreamEvent]) -> None:
        if not self.chain.reads_stream:
            await self._deliver(events)
            return
        passed: list[StreamEvent] = []
        try:
            for event in events:
                passed.extend(await self.chain.apply_stream_event(event, self.ctx))
        except (PolicyViolation, PolicyFailure):
            # Events a policy let through before the failure still go out, in
            # order, ahead of the error frame.
            if passed:
                await self._deliver(passed)
            raise
        await self._deliver(passed)

    async def _deliver(self, events: list[StreamEvent]) -> None:
        # Nothing commits before an event goes out: a call whose first event a
        # policy holds can still be refused with its own status.
        if not events:
            return
        if not self.committed:
            await self._commit()
        await self._body(events)

    async def _commit(self) -> None:
        self.committed = True
        call = self.call
        call.status = self.upstream.status
        metrics.milliseconds(
            names.METRIC_TIME_TO_FIRST_EVENT, (time.perf_counter() - call.started) * 1000
        )
        await call.send(
            {
                "type": "http.response.start",
                "status": self.upstream.status,
                "headers": merge_headers(self.upstream.headers, _SSE_HEADERS),
            }
        )

    async def _body(self, events: list[StreamEvent]) -> None:
        if events:
            body = encode_many(events)
            await self.call.send({"type": "http.response.body", "body": body, "more_body": True})
            if self.call.recording is not None:
                self.call.recording.streamed(body)

    async def _fail(self, error: GatewayError) -> None:
        """Before the commit, the error as JSON with its status; after it, one error frame."""
        if not self.committed:
            await self.call.respond(error.status, error.to_bytes())
            return
        self.call.end_stream_with(error.error_type, error.status)
        frame = StreamEvent.from_json(
            "error", error_body(error.status, error.message, error.error_type)
        )
        await self._body([frame])


def _error_type(event: StreamEvent) -> str:
    """An upstream `error` event's `error.type`, bounded like every word the upstream chose."""
    error = event.json.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return kind[:100] if isinstance(kind, str) and kind else "api_error"


def _is_event_stream(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(
        key == b"content-type" and value.split(b";", 1)[0].strip().lower() == b"text/event-stream"
        for key, value in headers
    )
