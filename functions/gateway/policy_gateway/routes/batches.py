"""Message Batches: every entry passes the request policies, every batch object points back here.

Create (POST /v1/messages/batches) runs the request chain on each entry's
`params` exactly as on a non-streaming POST /v1/messages (endpoint
`messages`, a fresh PolicyContext per entry), so redaction, rewrites, caps
and tool stripping hold per entry. A policy that refuses one entry refuses
the batch, naming the entry's `custom_id`: the upstream accepts or refuses
a batch as one request too. The batch goes upstream re-serialized from the
document the policies saw, whatever the chain, so the upstream cannot read
it differently from them.

There is no passthrough fallback here. An entry's own failure (the 4xx a
policy's change would cause) arrives hours later as an `errored` result,
when there is no call left to retry; a 4xx on the create concerns the batch
itself, which resending the unchanged original would only repeat around the
policies.

Retrieve, list, cancel and delete pass through, except for one field. The
API's `results_url` names the API's own host: an SDK following it would
fetch the results around the gateway's response policies (and, in
`gateway_key` mode, hand the gateway key to Anthropic). Every batch object
the gateway returns has it pointing at the gateway instead, same path and
query, on the base `public_base` picks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from gateway_policies import PolicyChain, PolicyContext, PolicyFailure, PolicyViolation

from .. import lambda_context, names, offload
from ..call import Call
from ..errors import GatewayError
from ..settings import Settings
from ..upstream.client import UpstreamResponse
from .body import dump_json, parse_object
from .endpoint import GatewayEndpoint
from .passthrough import PassthroughEndpoint
from .refusal import policy_error
from .upstream_answer import reach

_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?")
# Raised as a fresh instance each time: a shared one would keep every failed
# call's frames (and their request bodies) alive on its traceback.
_UNREADABLE = (
    502,
    "The upstream answered with a batch object the gateway could not read.",
    "api_error",
)


class BatchCreateEndpoint(GatewayEndpoint):
    """POST /v1/messages/batches: the request chain on every entry, then one upstream call."""

    async def _proxy(self, call: Call) -> None:
        gateway = self._gateway
        chain = await gateway.chain(call)
        try:
            # Request hooks always run on the worker loop (offload.py), batch entries too.
            new_context = partial(gateway.policy_context, call)
            body = await offload.run(_prepare(call.original, chain, new_context))
        except _EntryRefused as refused:
            error = policy_error(refused.cause, refused.ctx)
            message = f"{refused.name}: {error.message}"
            raise GatewayError(error.status, message, error.error_type) from None
        await gateway.admit(call)
        sending = gateway.send(call, body, names.LABEL_POLICY, stream=False)
        reached = await reach(call, sending, read=True)
        if reached is not None:
            upstream, answer = reached
            base = public_base(gateway.config, call.invocation)
            await call.respond(
                upstream.status, rewrite_results_urls(answer, base), upstream.headers
            )


class BatchObjectEndpoint(PassthroughEndpoint):
    """Retrieve, list, cancel, delete: passed through, with `results_url` pointing here."""

    buffered = True

    async def _deliver(self, call: Call, upstream: UpstreamResponse, body: bytes) -> None:
        base = public_base(self._gateway.config, call.invocation)
        await call.respond(upstream.status, rewrite_results_urls(body, base), upstream.headers)


class _EntryRefused(Exception):
    """A policy refused (or failed on) one entry; the serving loop counts and logs it."""

    def __init__(
        self, name: str, cause: PolicyViolation | PolicyFailure, ctx: PolicyContext
    ) -> None:
        super().__init__(name)
        self.name = name
        self.cause = cause
        self.ctx = ctx


async def _prepare(
    original: bytes, chain: PolicyChain, new_context: Callable[[], PolicyContext]
) -> bytes:
    """Parse, run the request chain on every entry, serialize: the batch to send."""
    batch = parse_object(original)
    entries = _entries(batch)
    if chain.reads_request:
        for index, (custom_id, params) in enumerate(entries):
            await _apply(chain, params, new_context(), _entry_name(custom_id, index))
    return dump_json(batch)


def _entries(batch: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each entry's custom_id and params, refusing any entry the policies could not judge.

    The API refuses these shapes too; refusing them here means no entry can
    reach the upstream without having passed the chain.
    """
    requests = batch.get("requests")
    if not isinstance(requests, list) or not requests:
        raise GatewayError(400, "requests: must be a non-empty list of {custom_id, params}.")
    entries: list[tuple[str, dict[str, Any]]] = []
    for index, entry in enumerate(requests):
        if not isinstance(entry, dict):
            raise GatewayError(400, f"requests[{index}]: must be an object.")
        custom_id, params = entry.get("custom_id"), entry.get("params")
        if not isinstance(custom_id, str):
            raise GatewayError(400, f"requests[{index}].custom_id: must be a string.")
        name = _entry_name(custom_id, index)
        if not isinstance(params, dict):
            raise GatewayError(400, f"{name}: params must be an object.")
        if params.get("stream", False) is not False:
            # The policies judge a batch entry as a non-streaming call.
            raise GatewayError(400, f"{name}: params.stream is not supported in a batch.")
        entries.append((custom_id, params))
    return entries


def _entry_name(custom_id: str, index: int) -> str:
    return f"Batch request {custom_id!r} (requests[{index}])"


async def _apply(chain: PolicyChain, params: dict[str, Any], ctx: PolicyContext, name: str) -> None:
    """The request chain on one entry, as on a single non-streaming call."""
    try:
        await chain.apply_request(params, ctx)
        if params.get("stream", False) is not False:
            raise PolicyFailure("<chain>", "on_request: changed 'stream'")
    except (PolicyViolation, PolicyFailure) as exc:
        raise _EntryRefused(name, exc, ctx) from None


def public_base(config: Settings, invocation: lambda_context.InvocationContext) -> str:
    """The gateway's base URL for the links it hands out ("" for a path relative to the client's).

    GATEWAY_PUBLIC_URL when the operator set it (a custom domain, CloudFront);
    else, in Lambda, the Function URL's host name from the request context
    (the adapter sets that header and replaces any a client sent); else
    nothing, and the SDKs resolve the path against their own base URL. The
    Host header is never used: it is the client's to choose, and a link built
    from it could send the client's key to any host.
    """
    if config.public_url:
        return config.public_url.rstrip("/")
    domain = invocation.url_domain
    if config.trust_lambda_context and domain and _HOST.fullmatch(domain):
        return f"https://{domain}"
    return ""


def rewrite_results_urls(body: bytes, base: str) -> bytes:
    """A batch object (or a list of them) with each `results_url` on the gateway's base.

    A body that is not a JSON object fails closed: passed on unread, it
    could carry a link around the gateway.
    """
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise GatewayError(*_UNREADABLE) from None
    if not isinstance(document, dict):
        raise GatewayError(*_UNREADABLE)
    data = document.get("data")
    items = data if isinstance(data, list) else [document]
    changed = False
    for item in items:
        url = item.get("results_url") if isinstance(item, dict) else None
        if isinstance(url, str) and url:
            item["results_url"] = _on_base(url, base)
            changed = True
    return dump_json(document) if changed else body


def _on_base(url: str, base: str) -> str:
    parts = urlsplit(url)
    path = parts.path if parts.path.startswith("/") else f"/{parts.path}"
    return base + path + (f"?{parts.query}" if parts.query else "")
