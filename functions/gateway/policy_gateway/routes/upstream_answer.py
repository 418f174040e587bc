"""The upstream's answer as a route awaits it: within the call's deadline, its error answered."""

from __future__ import annotations

from collections.abc import Awaitable

import anyio

from ..call import DEADLINE_ERROR, Call
from ..errors import GatewayError
from ..upstream.client import UpstreamResponse
from ..upstream.errors import UpstreamStatusError, UpstreamUnavailable


async def reach(
    call: Call, reaching: Awaitable[UpstreamResponse], *, read: bool
) -> tuple[UpstreamResponse, bytes] | None:
    """Await `reaching` (the route's sends) within the deadline; the answer, or None
    once its error was sent.

    With `read`, the whole body comes back too (it is b"" otherwise). An
    upstream status error goes to the client as the upstream said it, with
    this call's credentials scrubbed from it.
    """
    body = b""
    try:
        # The deadline covers the wait for the upstream's answer too: a
        # slow first byte must not outlive the Lambda invocation either.
        with anyio.move_on_after(call.seconds_left()) as budget:
            upstream = await reaching
            if read:
                try:
                    body = await upstream.read()
                finally:
                    upstream.span.end()
    except UpstreamStatusError as error:
        error.span.end()
        await call.respond(error.status, call.credentials.scrub(error.client_body), error.headers)
        return None
    except UpstreamUnavailable as exc:
        raise GatewayError(504 if exc.timeout else 502, str(exc)) from None
    if budget.cancelled_caught:
        raise GatewayError(*DEADLINE_ERROR)
    return upstream, body
