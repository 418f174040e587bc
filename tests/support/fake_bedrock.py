"""A scriptable fake of Amazon Bedrock Runtime, served for real over HTTP.

It checks what a real endpoint checks first: every request must carry a SigV4
`Authorization` for the service `bedrock` in the expected region, and the
signature must be the one botocore computes from the request as received
with the test credentials; anything else is answered 403
InvalidSignatureException. It answers InvokeModel with Messages API JSON,
InvokeModelWithResponseStream with real event-stream frames (correct prelude
and message CRCs, split into network chunks at awkward byte boundaries), and
CountTokens with `{"inputTokens": N}`.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from policy_gateway.upstream.bedrock.eventstream import encode_message
from starlette.types import Receive, Scope, Send

from .fake_upstream import SSE, last_user_text, message, text_events
from .scripted import Scripted
from .servers import lifespan_handled, request_body

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)
# Chunk sizes cycled through when a stream is sent: primes, so the cuts land
# inside preludes, headers, payloads and checksums, never only between messages.
AWKWARD = (1, 3, 7, 2, 13, 5, 31, 11, 64, 17)
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"


@dataclass
class Received:
    path: str
    """As sent, percent-encoded (a model ARN's `/` is one path segment)."""
    headers: dict[str, str]
    body: bytes
    region: str | None
    service: str | None
    signature_valid: bool

    @property
    def model_id(self) -> str:
        return unquote(self.path.split("/")[2])

    @property
    def operation(self) -> str:
        return self.path.rsplit("/", 1)[1]

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def invoke_body(self) -> Any:
        """The InvokeModel body, also when wrapped in a CountTokens request."""
        if self.operation == "count-tokens":
            return json.loads(base64.b64decode(self.json["input"]["invokeModel"]["body"]))
        return self.json


def chunk_message(event: dict[str, Any]) -> bytes:
    """One `chunk` event as Bedrock frames it: base64 Messages API event, plus padding."""
    data = base64.b64encode(json.dumps(event, separators=(",", ":")).encode()).decode()
    payload = json.dumps({"bytes": data, "p": PADDING}).encode()
    return encode_message(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        payload,
    )


def exception_message(name: str, text: str) -> bytes:
    return encode_message(
        {
            ":exception-type": name,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": text}).encode(),
    )


def frames(events: SSE) -> list[bytes]:
    return [chunk_message(data) for _, data in events]


def corrupt(frame: bytes) -> bytes:
    """The frame with one payload byte flipped: its message CRC no longer matches."""
    middle = len(frame) // 2
    return frame[:middle] + bytes([frame[middle] ^ 0x40]) + frame[middle + 1 :]


def split(data: bytes, sizes: tuple[int, ...] = AWKWARD) -> list[bytes]:
    chunks: list[bytes] = []
    position = 0
    index = 0
    while position < len(data):
        size = sizes[index % len(sizes)]
        chunks.append(data[position : position + size])
        position += size
        index += 1
    return chunks


@dataclass
class BedrockReply:
    """One scripted answer; `stream` (raw event-stream messages) makes it a stream."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: list[bytes] | None = None
    chunk_sizes: tuple[int, ...] = AWKWARD

    @classmethod
    def exception(cls, name: str, status: int, text: str = "scripted") -> BedrockReply:
        return cls(
            status=status,
            body={"message": text},
            headers={
                "x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"
            },
        )


class FakeBedrock(Scripted["Received", "BedrockReply"]):
    """ASGI app; records every request, answers from a script or like Bedrock would."""

    def __init__(self, region: str, credentials: Credentials) -> None:
        self.region = region
        self.credentials = credentials
        super().__init__()
        self._counter = 0

    def _verify(self, scope: Scope, headers: dict[str, str], body: bytes) -> Received:
        path = scope["raw_path"].decode("latin-1")
        match = _AUTHORIZATION.match(headers.get("authorization", ""))
        if match is None:
            return Received(path, headers, body, None, None, False)
        request = AWSRequest(
            method=scope["method"],
            url=f"http://{headers['host']}{path}",
            data=body,
            headers={name: headers[name] for name in match["signed"].split(";")},
        )
        request.context["timestamp"] = headers.get("x-amz-date", "")
        # The expected region and service: a signature for any other scope is wrong.
        signer = SigV4Auth(self.credentials.get_frozen_credentials(), "bedrock", self.region)
        expected = signer.signature(
            signer.string_to_sign(request, signer.canonical_request(request)), request
        )
        valid = (
            expected == match["signature"]
            and match["key"] == self.credentials.access_key
            and headers.get("x-amz-security-token") == self.credentials.token
            and "host" in match["signed"].split(";")
            and "x-amz-date" in match["signed"].split(";")
        )
        return Received(path, headers, body, match["region"], match["service"], valid)

    def _next(self, received: Received) -> BedrockReply:
        with self._lock:
            self.requests.append(received)
            self._counter += 1
            if not received.signature_valid:
                return BedrockReply.exception(
                    "InvalidSignatureException",
                    403,
                    "The request signature we calculated "
                    "does not match the signature you provided.",
                )
            if self._script:
                return self._script.popleft()
        body = received.invoke_body
        text = f"echo: {last_user_text(body)}"
        if received.operation == "count-tokens":
            return BedrockReply(body={"inputTokens": len(received.body) // 4})
        if received.operation == "invoke-with-response-stream":
            return BedrockReply(stream=frames(text_events(text.split(" "))))
        return BedrockReply(body=message(text))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await lifespan_handled(scope, receive, send):
            return
        body = await request_body(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        reply = self._next(self._verify(scope, headers, body))
        request_id = f"fake-bedrock-{self._counter:04d}"
        out = [(b"x-amzn-requestid", request_id.encode())]
        out += [(k.encode(), v.encode()) for k, v in reply.headers.items()]
        if reply.stream is None:
            await send(
                {
                    "type": "http.response.start",
                    "status": reply.status,
                    "headers": [(b"content-type", b"application/json"), *out],
                }
            )
            await send({"type": "http.response.body", "body": json.dumps(reply.body).encode()})
            return
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [
                    (b"content-type", b"application/vnd.amazon.eventstream"),
                    (b"x-amzn-bedrock-content-type", b"application/json"),
                    *out,
                ],
            }
        )
        for piece in split(b"".join(reply.stream), reply.chunk_sizes):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
