"""The upstream client: send one request body to the upstream API, with the SDK's retry policy.

Bytes go through untouched (httpx2, the client the anthropic SDK is built on).
Errors are classified by status, as the SDK does, never by message text, and
httpx2's errors are translated here, into UpstreamStatusError and
UpstreamUnavailable, and nowhere else. Retries follow retry.py, up to
UPSTREAM_MAX_RETRIES times; a stream that has started is never retried. Every
attempt is one trace span. What differs between upstream APIs is the
`Provider` (provider.py), chosen here (`provider_for`).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import cache

import anyio
import httpx2

from .. import names, settings
from ..observability import metrics, spans, tracing
from . import framing
from .anthropic import AnthropicProvider
from .errors import (
    UNREADABLE_ERRORS,
    UpstreamStatusError,
    UpstreamUnavailable,
    unavailable,
    unrelayable_status,
)
from .provider import Provider
from .retry import retry_delay, should_retry


@dataclass
class Tries:
    """How many requests one send put on the wire, retries included (the call's `attempts`)."""

    count: int = 0


@dataclass
class UpstreamResponse:
    """A successful attempt: the status line and headers, and the body (read, or still to)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    _response: httpx2.Response = field(repr=False)
    span: spans.Span = field(repr=False)
    request_id: str | None
    _provider: Provider = field(repr=False)
    _path: str
    _body: bytes = field(repr=False)
    """The whole body of a non-streaming attempt (read within the cap); b"" for a stream."""

    async def read(self) -> bytes:
        try:
            return self._provider.answer(self._path, self._body)
        finally:
            await self.close()

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, as SSE; a reset or a stall mid-stream is UpstreamUnavailable."""
        return self._provider.events(self._raw_chunks())

    async def _raw_chunks(self) -> AsyncIterator[bytes]:
        response = self._response
        # A body with no content coding (every Messages stream) is read raw: the
        # decoder and re-chunker of `aiter_bytes` would pass each event through
        # unchanged, a few percent of what relaying an event costs (docs/performance.md).
        coding = response.headers.get("content-encoding", "").strip().lower()
        encoded = coding not in ("", "identity")
        try:
            async for chunk in response.aiter_bytes() if encoded else response.aiter_raw():
                yield chunk
        except UNREADABLE_ERRORS as exc:
            raise unavailable(exc) from None

    async def close(self) -> None:
        # Shielded: a call cancelled by a client disconnect or the deadline
        # must still release the upstream connection.
        await _close(self._response)


@cache
def _tls() -> ssl.SSLContext:
    # The trust store, loaded once per process (~35 ms): a SnapStart restore
    # builds a new client on it. A context keeps no connection and no session.
    return httpx2.create_ssl_context()


class UpstreamClient:
    """A pooled HTTP client for the upstream, shared by every call in the process."""

    def __init__(
        self,
        config: settings.Settings,
        transport: httpx2.AsyncBaseTransport | None = None,
        provider: Provider | None = None,
    ):
        self._provider = provider or provider_for(config)
        self._max_retries = max(0, config.upstream_max_retries)
        self._max_answer_bytes = config.upstream_max_answer_bytes
        limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        self._client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(
                config.upstream_read_timeout, connect=config.upstream_connect_timeout
            ),
            limits=limits,
            transport=transport or framing.guarded_transport(_tls(), limits),
            verify=_tls(),
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def attempt(
        self,
        path: str,
        body: bytes,
        headers: Sequence[tuple[str, str]],
        *,
        stream: bool,
        label: str,
        tries: Tries,
        deadline: float | None = None,
        method: str = "POST",
    ) -> UpstreamResponse:
        """Send until success, a non-retryable error, or retries run out; counting tries in `tries`.

        Returns when the upstream said 2xx, a non-streaming body read (within
        UPSTREAM_MAX_ANSWER_BYTES), a stream's still to read; raises UpstreamStatusError or
        UpstreamUnavailable otherwise (the tries counted, even if cancelled). `deadline` (a
        time.time() value) stops retries that could not finish in time."""
        provider = self._provider
        outbound = provider.outbound(path, body, headers, stream=stream)
        request = self._client.build_request(
            method, outbound.url, content=outbound.body, headers=outbound.headers
        )
        retry = 0
        while True:
            await provider.sign(request)
            tries.count += 1
            span = tracing.start_span(f"upstream {label} attempt {retry + 1}")
            try:
                response, body, error = await self._exchange(request, stream=stream, span=span)
            except anyio.get_cancelled_exc_class():
                # The call's deadline passed: the span must not stay open under
                # the next call's spans.
                span.end()
                raise
            except UpstreamUnavailable as exc:
                # An answer too large or undecodable: asking again would only repeat it.
                span.end(exc)
                raise
            except httpx2.TransportError as exc:
                span.end(exc)
                metrics.count(names.METRIC_UPSTREAM_CONNECTION_ERRORS)
                delay = retry_delay(retry, None)
                if not self._may_retry(retry, deadline, delay):
                    raise unavailable(exc) from None
            else:
                if error is None:
                    return await _answer(response, body, span, provider, path)
                delay = retry_delay(retry, response.headers)
                retryable = not error.final and should_retry(error.status, response.headers)
                if not (retryable and self._may_retry(retry, deadline, delay)):
                    if retryable and retry:
                        error.tell_client_not_to_retry()
                    raise error
                span.end()
            await anyio.sleep(delay)
            retry += 1

    async def _exchange(
        self, request: httpx2.Request, *, stream: bool, span: spans.Span
    ) -> tuple[httpx2.Response, bytes, UpstreamStatusError | None]:
        """One HTTP exchange: the response, its body unless streamed, and its status error
        if it is one; the response is closed on any failure.

        A non-streaming body is read here, so a reset mid-body is retried like
        a refused connection.
        """
        response = await self._client.send(request, stream=True)
        try:
            framing.check(response, request)
            if not 200 <= response.status_code <= 299:
                return response, b"", await self._status_error(response, span)
            body = b"" if stream else await read_capped(response, self._max_answer_bytes)
            return response, body, None
        except BaseException:
            await _close(response)
            raise

    def _may_retry(self, retry: int, deadline: float | None, delay: float) -> bool:
        """Whether a retry after `delay` seconds is allowed and could still beat `deadline`."""
        if retry >= self._max_retries:
            return False
        return deadline is None or time.time() + delay < deadline

    async def _status_error(
        self, response: httpx2.Response, span: spans.Span
    ) -> UpstreamStatusError:
        try:
            body = await read_capped(response, self._max_answer_bytes)
        except (httpx2.TransportError, UpstreamUnavailable):
            body = b""
        finally:
            await response.aclose()
        unrelayable = unrelayable_status(response.status_code)
        if unrelayable is None:
            status, body = self._provider.status_error(response.status_code, response.headers, body)
        else:
            status, body = unrelayable
        metrics.count(names.METRIC_UPSTREAM_5XX if status >= 500 else names.METRIC_UPSTREAM_4XX)
        span.annotate(names.ANNOTATION_UPSTREAM_STATUS, status)
        error = UpstreamStatusError(
            status,
            body,
            self._provider.downstream(response.headers),
            span,
            _request_id(response, self._provider, span),
            final=unrelayable is not None,
        )
        if error.final:
            error.tell_client_not_to_retry()
        return error


async def _answer(
    response: httpx2.Response, body: bytes, span: spans.Span, provider: Provider, path: str
) -> UpstreamResponse:
    """The successful attempt as the routes see it; its connection released if that fails."""
    try:
        return UpstreamResponse(
            response.status_code,
            provider.downstream(response.headers),
            response,
            span,
            _request_id(response, provider, span),
            provider,
            path,
            body,
        )
    except BaseException as exc:
        span.end(exc)
        await _close(response)
        raise


async def _close(response: httpx2.Response) -> None:
    # Shielded, as UpstreamResponse.close: a cancelled call must release its connection too.
    with anyio.CancelScope(shield=True):
        await response.aclose()


async def read_capped(response: httpx2.Response, limit: int) -> bytes:
    """The whole (decoded) body, refused once it passes `limit` bytes, before it all sits
    in memory: a policy parsing a 60 MB answer of tiny blocks needs ten times that."""
    parts: list[bytes] = []
    size = 0
    try:
        async for part in response.aiter_bytes():
            size += len(part)
            if size > limit:
                raise UpstreamUnavailable(
                    f"the upstream API's answer is larger than the gateway's limit of {limit} "
                    f"bytes ({settings.ENV_UPSTREAM_MAX_ANSWER_BYTES})",
                    timeout=False,
                )
            parts.append(part)
    except httpx2.DecodingError as exc:
        raise unavailable(exc) from None
    return b"".join(parts)


def _request_id(response: httpx2.Response, provider: Provider, span: spans.Span) -> str | None:
    """The upstream's id for the attempt, on its span; capped like every logged header value."""
    request_id = response.headers.get(provider.request_id_header)
    if not request_id:
        return None
    request_id = request_id[:100]
    span.describe(names.ATTRIBUTE_UPSTREAM_REQUEST_ID, request_id)
    return request_id


def provider_for(config: settings.Settings) -> Provider:
    if config.bedrock:
        # Imported only here: it brings botocore, which the Anthropic path never needs.
        from .bedrock.provider import BedrockProvider

        return BedrockProvider(config)
    return AnthropicProvider(config.upstream_base_url)
