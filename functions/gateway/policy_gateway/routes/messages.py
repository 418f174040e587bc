"""POST /v1/messages and /v1/messages/count_tokens: the call's way through the policies.

request in → `_prepare` (parse, request hooks, serialize) → `Fallback.send`
(the upstream attempt through `Gateway.send`, and the passthrough
fallback) → the response hooks
(`_relay_json`) or the stream policies (stream_relay.py) → the client.
"""

from __future__ import annotations

import json
from typing import Any

from gateway_policies import PolicyChain, PolicyContext, PolicyFailure, PolicyViolation

from .. import offload
from ..call import Call
from ..errors import GatewayError
from ..fallback import repair
from ..fallback.prepared import PreparedRequest
from ..upstream.client import UpstreamResponse
from .body import dump_json, parse_object
from .endpoint import GatewayEndpoint
from .refusal import policy_error
from .stream_relay import UNREADABLE, StreamRelay, watched
from .upstream_answer import reach
from .usage import add_body_usage, add_message_usage

# Bodies above this are parsed on the worker loop even when no request hook runs:
# parsing a few megabytes of tiny objects takes a few hundred milliseconds.
OFFLOAD_BODY_BYTES = 64 * 1024


class MessagesEndpoint(GatewayEndpoint):
    async def _proxy(self, call: Call) -> None:
        """Parse, run the chain, reach the upstream (with the fallback), relay the answer."""
        gateway = self._gateway
        chain = await gateway.chain(call)
        ctx = gateway.policy_context(call, endpoint=self._endpoint)
        prepare = _prepare(call.original, chain, ctx)
        try:
            if chain.reads_request or len(call.original) > OFFLOAD_BODY_BYTES:
                prepared = await offload.run(prepare)
            else:
                prepared = await prepare
        except (PolicyViolation, PolicyFailure) as exc:
            raise policy_error(exc, ctx) from None
        call.stream = prepared.ctx.stream
        # After the chain (a cap on max_tokens is what is admitted), before anything is sent.
        request = prepared.modified
        if self._endpoint != "messages" or not isinstance(request, dict):
            request = None
        await gateway.admit(call, request, len(prepared.sent))
        sending = gateway.fallback.send(call, prepared, gateway.send)
        reached = await reach(call, sending, read=not call.stream)
        if reached is None:
            return
        upstream, body = reached
        if call.stream:
            limit = gateway.config.upstream_max_answer_bytes
            await StreamRelay(upstream, chain, prepared.ctx, call, limit).run()
        else:
            await _relay_json(upstream, body, chain, prepared.ctx, call)


async def _prepare(original: bytes, chain: PolicyChain, ctx: PolicyContext) -> PreparedRequest:
    """Parse, run the request hooks, serialize: what the first attempt sends, and from what.

    Policy errors are raised as they are, for the serving loop to count and log.
    """
    request = parse_object(original)
    stream = ctx.stream = ctx.endpoint == "messages" and request.get("stream") is True
    if not chain.reads_request:
        return PreparedRequest(original, original, request, chain, ctx, dump_json)
    await chain.apply_request(request, ctx)
    if (request.get("stream") is True) != stream:
        raise PolicyFailure("<chain>", "on_request: changed 'stream'")
    if not chain.has_request_hooks:
        # Shadow policies alone changed nothing: the original goes as it came.
        return PreparedRequest(original, original, request, chain, ctx, dump_json)
    await repair.before_sending(original, request, chain, ctx)
    return PreparedRequest(original, dump_json(request), request, chain, ctx, dump_json)


async def _relay_json(
    upstream: UpstreamResponse, body: bytes, chain: PolicyChain, ctx: PolicyContext, call: Call
) -> None:
    usage_owed = ctx.endpoint == "messages" and upstream.status == 200
    if ctx.endpoint == "messages" and (watched(chain) or chain.reads_response):
        response = _parsed(body)
        if response is not None:
            if usage_owed:
                # The upstream's usage, before any policy could change the answer.
                add_message_usage(call.usage, response)
                usage_owed = False
            body = await _judged(body, response, chain, ctx)
        elif watched(chain):
            # What the response policies cannot read must not reach the client unseen.
            raise GatewayError(*UNREADABLE)
        # Else only shadow policies would have read it, and they never fail a call.
    await call.respond(upstream.status, body, upstream.headers)
    if usage_owed:
        # Parsed after the answer went out, so the client never waits for it.
        add_body_usage(call.usage, body)


def _parsed(body: bytes) -> dict[str, Any] | None:
    try:
        response = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return response if isinstance(response, dict) else None


async def _judged(
    body: bytes, response: dict[str, Any], chain: PolicyChain, ctx: PolicyContext
) -> bytes:
    """The body the client gets once the response policies have judged `response`, parsed
    from `body`: as it came when only shadow policies read it."""
    if chain.reads_response:
        try:
            await chain.apply_response(response, ctx)
        except (PolicyViolation, PolicyFailure) as exc:
            raise policy_error(exc, ctx) from None
    return dump_json(response) if chain.has_response_hooks else body
