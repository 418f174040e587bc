"""What every call of every route shares and outlives it, and the one way upstream.

`Gateway` is built once, when the app is (app.py), and rebuilt after a SnapStart
restore; each route's endpoint reads it. `Gateway.send` is every route's one
way upstream: the fallback ladder (fallback/send.py) calls it once per attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway_policies import PolicyChain, PolicyContext

from .. import settings
from ..auth.authenticator import Authenticator
from ..auth.upstream_key import UpstreamKey
from ..call import Call
from ..fallback.send import Fallback
from ..limits.limiter import Limiter
from ..observability import tracing
from ..policy_source import PolicySource
from ..records.writer import RecordWriter
from ..upstream.client import Tries, UpstreamClient, UpstreamResponse
from ..upstream.errors import UpstreamStatusError

# The route whose calls the `record` option keeps (count_tokens and batches are not
# conversations).
RECORDED_ENDPOINT = "messages"


@dataclass
class Gateway:
    """Everything a call needs that outlives it."""

    config: settings.Settings
    upstream: UpstreamClient
    fallback: Fallback
    policies: PolicySource
    auth: Authenticator
    upstream_key: UpstreamKey | None
    limits: Limiter = field(default_factory=Limiter)
    """Counted in this process unless built with LIMITS_TABLE's store (app.py)."""
    records: RecordWriter | None = None
    """Where recorded calls go; None without RECORDS_BUCKET or RECORDS_DIR."""

    def policy_context(
        self, call: Call, *, endpoint: str = "messages", kept: bool = True
    ) -> PolicyContext:
        """A fresh context for one run of the chain (one request, one batch entry, one result),
        naming the call's caller and groups, kept on the call so its actions reach the call's
        log line (unless `kept` is False: the caller then keeps it once it holds actions).

        Not streaming: the Messages route says so once it has parsed the body.
        """
        key = self.upstream_key
        ctx = PolicyContext(
            endpoint=endpoint,
            stream=False,
            call_id=call.call_id,
            upstream_api_key=None if key is None else key.get,
            caller=call.caller,
            caller_groups=call.caller_groups,
            deadline=call.deadline,
            upstream_base_url=(
                self.config.upstream_base_url
                if self.config.upstream_provider == settings.PROVIDER_ANTHROPIC
                else None
            ),
            start_span=tracing.start_span,
        )
        if kept:
            call.contexts.append(ctx)
        return ctx

    async def chain(self, call: Call) -> PolicyChain:
        """The call's chain (its caller's, its group's or the default), its name and the
        document's version noted for its log line; a 500 when no document ever loaded."""
        loaded = await self.policies.loaded()
        chain = loaded.document.resolve(call.caller, call.caller_groups)
        call.chain_version = loaded.version
        call.chain = chain.name
        if (
            self.records is not None
            and call.endpoint == RECORDED_ENDPOINT
            and loaded.record.enabled(call.caller, call.caller_groups)
        ):
            call.recording = self.records.recording()
        return chain

    async def admit(self, call: Call, request: dict[str, Any] | None = None, size: int = 0) -> None:
        """Count the call under its caller's limits, or raise their 429 (limits/limiter.py)."""
        loaded = await self.policies.loaded()
        await self.limits.admit(call, loaded.limits, request, size)

    async def charge(self, call: Call) -> None:
        """Count what the call's answer reports under the caller's limits, admitting nothing
        (a batch's results: the work is done, its tokens and spend are owed)."""
        loaded = await self.policies.loaded()
        await self.limits.charge(call, loaded.limits)

    async def warm(self) -> None:
        """Make the AWS reads a first call would otherwise make, so that init pays for them.

        The policy document (from SSM when configured so), the fallback flag when a
        fallback is possible (one of its chains has request hooks), and the secrets in
        `gateway_key` mode (unless `warm_secrets` is off). Each read is bounded
        (`parameters.READ_DEADLINE_SECONDS`) and a failed one is handled as on any call: a
        gateway whose chain could not load is ready to refuse calls, exactly as it would
        after start-up.
        """
        if self.config.warm_secrets:
            await asyncio.gather(self.auth.warm(), self._warm_policies())
        else:
            await self._warm_policies()

    async def _warm_policies(self) -> None:
        document = await self.policies.load()
        if document is not None and any(chain.has_request_hooks for chain in document.chains):
            await self.fallback.flag.enabled()

    async def send(
        self,
        call: Call,
        body: bytes,
        label: str,
        *,
        stream: bool,
        headers: Sequence[tuple[str, str]] | None = None,
        method: str = "POST",
    ) -> UpstreamResponse:
        """Send one body upstream for the call, retries included: every route's one way there.

        The call's log line counts each request that went upstream and names
        the last answer's request id, whether the upstream accepted or refused.
        """
        tries = Tries()
        try:
            upstream = await self.upstream.attempt(
                upstream_path(call),
                body,
                call.forwarded if headers is None else headers,
                stream=stream,
                label=label,
                deadline=call.deadline,
                method=method,
                tries=tries,
            )
        except UpstreamStatusError as error:
            call.upstream_request_id = call.credentials.scrub_text(error.request_id)
            raise
        finally:
            call.attempts += tries.count
        call.upstream_request_id = call.credentials.scrub_text(upstream.request_id)
        call.sent = body
        return upstream


def upstream_path(call: Call) -> str:
    """The path (and query) the upstream gets: the client's, minus any credential."""
    path: str = call.scope["path"]
    if call.scope.get("query_string"):
        # A credential never travels upstream in the URL either (a client
        # that put its gateway key there would hand it to Anthropic).
        path += "?" + call.credentials.scrub_query(call.scope["query_string"]).decode("latin-1")
    return path
