"""GET /v1/messages/batches/{id}/results: the results file, line by line through the policies.

Each line of the JSONL file is one entry. A `succeeded` entry's `message` is
a Messages response like any other, so the response chain runs on it exactly
as on a single non-streaming call (endpoint `messages`, a fresh
PolicyContext per entry): `block_tool_calls` replaces a blocked call the same
way. A policy that refuses a message (or crashes on it) turns that entry
into an `errored` one carrying the error a single call would have got; the
other entries carry on. `errored`, `canceled` and `expired` entries, and any
other result type, pass byte for byte.

The gateway holds one line at a time (at most MAX_LINE_BYTES), never the
file: results run to gigabytes. With no response hook in the chain the bytes
are relayed as they arrive, unread.

Fail closed: with response hooks in the chain, a line the policies cannot
read (not JSON, no `result` object, too long) is never passed on. Before
anything was sent that is a 502; after, the response is cut without its
final chunk, so the client's read fails rather than ending on a file that
silently lacks entries.

The call line's tokens are the sum over the succeeded entries' `usage` (its
`model` the entries' model, `mixed` when they differ), read from the lines the
response chain reads: with no response hook the file is relayed unread and
the call line has no token counts, unless the caller has limits: then each
line is read for its `usage` only (`UsageLines`), and counted at the batch price.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn

from gateway_policies import PolicyChain, PolicyContext, PolicyFailure, PolicyViolation, recorder

from ..call import Call
from ..errors import GatewayError
from ..observability.logs import logger
from ..upstream.client import UpstreamResponse
from .body import dump_json
from .passthrough import BodyRelay, BodyWithheld, PassthroughEndpoint
from .refusal import policy_error
from .usage import add_message_usage

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest result line the gateway reads. A Messages response is far
smaller even at the largest output budgets; a longer line is withheld."""


class ResultsEndpoint(PassthroughEndpoint):
    _chain: PolicyChain | None = None

    async def _proxy(self, call: Call) -> None:
        # The chain first: without a usable one the call fails before reaching the upstream.
        self._chain = await self._gateway.chain(call)
        await self._gateway.charge(call)
        await super()._proxy(call)

    async def _deliver(self, call: Call, upstream: UpstreamResponse, body: bytes) -> None:
        chain = self._chain
        new_context = partial(self._gateway.policy_context, call, kept=False)
        lines: ResultLines | UsageLines | None = None
        if chain and chain.has_response_hooks:
            lines = ResultLines(chain, new_context, call)
        elif call.limits is not None:
            lines = UsageLines(call)
        await BodyRelay(upstream, call).run(lines)


class ResultLines:
    """Split a JSONL body into lines and run each succeeded entry through the response chain."""

    def __init__(
        self, chain: PolicyChain, new_context: Callable[[], PolicyContext], call: Call
    ) -> None:
        self.chain = chain
        self.new_context = new_context
        self.call = call
        self.pending = bytearray()
        self.lines = 0

    async def feed(self, chunk: bytes) -> bytes:
        self.pending += chunk
        out = bytearray()
        start = 0
        while (end := self.pending.find(b"\n", start)) >= 0:
            out += await self._line(bytes(self.pending[start : end + 1]))
            start = end + 1
        del self.pending[:start]
        if len(self.pending) > MAX_LINE_BYTES:
            self._withhold("a result line is longer than the gateway reads", None)
        return bytes(out)

    async def end(self) -> bytes:
        if not self.pending:
            return b""
        last = bytes(self.pending)
        self.pending.clear()
        return await self._line(last)

    async def _line(self, raw: bytes) -> bytes:
        self.lines += 1
        if not raw.strip():
            return raw
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            entry = None
        result = entry.get("result") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(result, dict):
            self._withhold("a result line is not a JSON entry with a result", entry)
        if result.get("type") != "succeeded":
            return raw
        message = result.get("message")
        if isinstance(message, dict):
            add_message_usage(self.call.usage, message)
            refusal = await self._judge(message)
        else:
            refusal = GatewayError(
                502, "The gateway could not read this result's message; it was withheld."
            )
        if refusal is not None:
            entry["result"] = _errored(refusal)
        try:
            dumped = dump_json(entry)
        except GatewayError:
            self._withhold("a result line could not be re-serialized", entry)
        return dumped + raw[len(raw.rstrip(b"\r\n")) :]

    async def _judge(self, message: dict[str, Any]) -> GatewayError | None:
        # A context per entry, kept only when a policy acted: the call holds
        # one line at a time, not a context per line of the file.
        ctx = self.new_context()
        try:
            await self.chain.apply_response(message, ctx)
        except (PolicyViolation, PolicyFailure) as exc:
            return policy_error(exc, ctx)
        finally:
            if ctx.actions:
                self.call.contexts.append(ctx)
        return None

    def _withhold(self, reason: str, entry: Any) -> NoReturn:
        custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
        logger.error(
            "batch results: withholding the rest of the file",
            extra={
                "reason": reason,
                "line": self.lines,
                "custom_id": recorder.text(custom_id) if isinstance(custom_id, str) else None,
            },
        )
        raise BodyWithheld(
            f"The gateway withheld the batch results from line {self.lines} on: {reason}, "
            "so the response policies could not judge it."
        )


class UsageLines:
    """The results file relayed byte for byte, each succeeded entry's `usage` counted on the
    way: for the caller's limits when no response hook reads the file. Fail open, as the
    relay it rides on: a line it cannot read is passed on and counts nothing."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.pending = bytearray()

    async def feed(self, chunk: bytes) -> bytes:
        self.pending += chunk
        *lines, rest = self.pending.split(b"\n")
        for line in lines:
            self._count(line)
        # A line longer than a result can be is not read (nor held).
        self.pending = bytearray(rest) if len(rest) <= MAX_LINE_BYTES else bytearray()
        return chunk

    async def end(self) -> bytes:
        self._count(bytes(self.pending))
        self.pending.clear()
        return b""

    def _count(self, raw: bytes | bytearray) -> None:
        if b'"succeeded"' not in raw:
            return
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            return
        result = entry.get("result") if isinstance(entry, dict) else None
        if isinstance(result, dict) and result.get("type") == "succeeded":
            message = result.get("message")
            if isinstance(message, dict):
                add_message_usage(self.call.usage, message)


def _errored(error: GatewayError) -> dict[str, Any]:
    """An `errored` result carrying the error a single call would have answered with."""
    return {
        "type": "errored",
        "error": {
            "type": "error",
            "error": {"type": error.error_type, "message": error.message},
        },
    }
