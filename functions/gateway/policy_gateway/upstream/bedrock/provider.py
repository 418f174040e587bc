"""Amazon Bedrock as the upstream: Claude through bedrock-runtime, spoken as the Messages API.

The gateway hands over a Messages API request; this provider sends it as
InvokeModel / InvokeModelWithResponseStream (or CountTokens), signed with
SigV4 for the `bedrock` service using the standard AWS credential chain
(the function's role in Lambda), and turns the answers back: JSON bodies are
Messages API JSON already, the event stream becomes SSE with every frame's
`event:` line, and Bedrock's exceptions become Anthropic-shaped errors with
the status a Messages API client expects. The client's own `x-api-key` or
`Authorization` never reaches AWS: the request carries only the headers built
here.

The body keeps every member the policies produced byte for byte (thinking
blocks included); only `model` and `stream` are removed and
`anthropic_version` (and `anthropic_beta`, from the `anthropic-beta` header)
added, as Bedrock's Anthropic models expect, and for CountTokens a `max_tokens`
where the request has none (Bedrock requires one; it does not change the count).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Sequence
from urllib.parse import quote

import anyio
import httpx2
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials
from botocore.session import Session

from ... import settings
from ...errors import GatewayError
from ...headers import downstream_headers
from ...observability.logs import logger
from ..provider import Outbound
from .body import join_members, split_members
from .errors import exception_error
from .stream import sse_from_event_stream

SIGNING_NAME = "bedrock"
ANTHROPIC_VERSION = "bedrock-2023-05-31"
REQUEST_ID_HEADER = "x-amzn-requestid"
MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
EVENT_STREAM = "application/vnd.amazon.eventstream"
SSE_CONTENT_TYPE = b"text/event-stream; charset=utf-8"

# CountTokens takes only foundation-model IDs: a cross-Region inference
# profile (`us.anthropic...`, `global.anthropic...`, or its ARN) is counted
# with the model it routes to, which tokenizes alike.
_PROFILE = re.compile(r"^(?:arn:[^/]+:inference-profile/)?[a-z]+(?:-[a-z]+)*\.(anthropic\..+)$")


# Bedrock's model identifiers, and only those: a model ID (`anthropic.claude-...-v1:0`),
# an inference-profile ID (`us.anthropic...`), or a Bedrock ARN of a model, profile or
# provisioned throughput. Every part starts with a letter or digit, so no `.`, `..` or
# empty segment (which an HTTP client would resolve, sending the signed request to
# `/model/invoke` or `/invoke`) and no `/` outside an ARN's resource can get through.
# Bedrock's own API pattern is looser (it admits `[a-zA-Z0-9-:.]+`, `..` included).
_PART = r"[A-Za-z0-9][A-Za-z0-9_-]*"
_DOTTED = rf"{_PART}(?:[.:]{_PART})*"
_RESOURCE_TYPES = (
    "foundation-model",
    "inference-profile",
    "application-inference-profile",
    "provisioned-model",
    "custom-model",
    "custom-model-deployment",
    "imported-model",
    "prompt-router",
    "default-prompt-router",
)
_MODEL_ID = re.compile(
    rf"(?:{_PART}\.{_DOTTED}"
    rf"|arn:aws(?:-[a-z]+)*:bedrock:[a-z0-9-]{{0,20}}:(?:[0-9]{{12}})?:"
    rf"(?:{'|'.join(_RESOURCE_TYPES)})/{_DOTTED}(?:/{_DOTTED})?)"
)
# Bedrock's limit on a model identifier's length.
_MAX_MODEL_ID_LENGTH = 2048
# A Messages API model name (`claude-sonnet-4-6`): never a dot, a colon or a slash.
_MODEL_NAME = re.compile(_PART)


def is_bedrock_model_id(model: str) -> bool:
    """Whether `model` has the form of a Bedrock model ID, inference-profile ID or ARN."""
    return len(model) <= _MAX_MODEL_ID_LENGTH and _MODEL_ID.fullmatch(model) is not None


def parse_model_map(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"{settings.ENV_BEDROCK_MODEL_MAP} is not JSON") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and is_bedrock_model_id(v)
        for k, v in value.items()
    ):
        raise ValueError(
            f"{settings.ENV_BEDROCK_MODEL_MAP} must be a JSON object of model name → "
            "Bedrock model or inference-profile ID (or ARN)"
        )
    return value


class BedrockProvider:
    """Claude on Amazon Bedrock (bedrock-runtime), behind the Provider interface."""

    request_id_header = REQUEST_ID_HEADER

    def __init__(self, config: settings.Settings, session: Session | None = None) -> None:
        session = session or Session()
        # Else the AWS configuration's (AWS_DEFAULT_REGION, the profile), as boto3 would.
        region = config.bedrock_region or session.get_config_variable("region")
        if not region:
            raise ValueError(
                f"{settings.ENV_BEDROCK_REGION} (or the function's AWS_REGION) must be set"
            )
        self.region: str = region
        suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
        endpoint = config.bedrock_endpoint_url or f"https://bedrock-runtime.{region}{suffix}"
        if httpx2.URL(endpoint).scheme not in ("http", "https"):
            raise ValueError(f"{settings.ENV_BEDROCK_ENDPOINT_URL} must be an http(s) URL")
        self.endpoint = endpoint.rstrip("/")
        self.models = parse_model_map(config.bedrock_model_map)
        self._credentials: Credentials | None = session.get_credentials()
        if config.auth_mode == settings.AUTH_PASSTHROUGH:
            logger.warning(
                "UPSTREAM_PROVIDER=bedrock with AUTH_MODE=passthrough: no one checks the "
                "client's key; anyone who can reach the gateway calls Bedrock on this "
                "account unless the Function URL uses AWS_IAM"
            )

    # ----------------------------------------------------------------- requests

    def model_id(self, model: object) -> str:
        """The Bedrock model a request names, refused before anything is signed or sent."""
        if not isinstance(model, str) or not model:
            raise GatewayError(400, "model: a model name is required.")
        mapped = self.models.get(model)
        if mapped is not None:
            return mapped
        if is_bedrock_model_id(model):
            return model
        if _MODEL_NAME.fullmatch(model):
            raise GatewayError(
                404,
                f"model: {model!r} is not in {settings.ENV_BEDROCK_MODEL_MAP} and is not a "
                "Bedrock model ID.",
                "not_found_error",
            )
        raise GatewayError(
            400,
            f"model: {model[:100]!r} is neither a model name nor a Bedrock model ID, "
            "inference-profile ID or ARN.",
        )

    def outbound(
        self, path: str, body: bytes, headers: Sequence[tuple[str, str]], *, stream: bool
    ) -> Outbound:
        route = path.partition("?")[0]
        if route not in (MESSAGES_PATH, COUNT_TOKENS_PATH):
            raise GatewayError(
                404, f"{route} is not offered by the Bedrock upstream.", "not_found_error"
            )
        try:
            members = split_members(body.decode(json.detect_encoding(body)))
        except (ValueError, UnicodeDecodeError):
            raise GatewayError(400, "Request body must be a JSON object.") from None
        values = dict(members)
        model = self.model_id(json.loads(values["model"]) if "model" in values else None)
        kept = [(key, raw) for key, raw in members if key not in ("model", "stream")]
        if "anthropic_version" not in values:
            kept.append(("anthropic_version", json.dumps(ANTHROPIC_VERSION)))
        betas = [
            beta.strip()
            for name, value in headers
            if name.lower() == "anthropic-beta"
            for beta in value.split(",")
            if beta.strip()
        ]
        if betas and "anthropic_beta" not in values:
            kept.append(("anthropic_beta", json.dumps(betas)))
        if route == COUNT_TOKENS_PATH:
            if "max_tokens" not in values:
                # CountTokens validates the body as an InvokeModel body, where
                # max_tokens is required (and must exceed a thinking budget);
                # its value does not change the count.
                kept.append(("max_tokens", str(_thinking_budget(values.get("thinking")) + 1)))
            match = _PROFILE.match(model)
            model = match.group(1) if match else model
            operation = "count-tokens"
            inner = join_members(kept)
            wrapped = {"input": {"invokeModel": {"body": base64.b64encode(inner).decode()}}}
            payload = json.dumps(wrapped).encode()
            accept = [("accept", "application/json")]
        elif stream:
            operation = "invoke-with-response-stream"
            payload = join_members(kept)
            accept = [("accept", EVENT_STREAM), ("x-amzn-bedrock-accept", "application/json")]
        else:
            operation = "invoke"
            payload = join_members(kept)
            accept = [("accept", "application/json")]
        url = f"{self.endpoint}/model/{quote(model, safe='')}/{operation}"
        return Outbound(url, payload, [("content-type", "application/json"), *accept])

    async def sign(self, request: httpx2.Request) -> None:
        credentials = self._credentials
        if credentials is None:
            raise GatewayError(
                500, "The gateway has no AWS credentials to call Bedrock with.", "api_error"
            )
        if isinstance(credentials, RefreshableCredentials) and credentials.refresh_needed():
            # A refresh may call STS or the container endpoint: off the event loop.
            frozen = await anyio.to_thread.run_sync(credentials.get_frozen_credentials)
        else:
            frozen = credentials.get_frozen_credentials()
        signed = AWSRequest(
            method=request.method,
            url=str(request.url),
            data=request.content,
            headers={
                name: request.headers[name]
                for name in ("host", "content-type", "accept", "x-amzn-bedrock-accept")
                if name in request.headers
            },
        )
        SigV4Auth(frozen, SIGNING_NAME, self.region).add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = signed.headers.get(name)
            if value is not None:
                request.headers[name] = value

    # ---------------------------------------------------------------- responses

    def status_error(self, status: int, headers: httpx2.Headers, body: bytes) -> tuple[int, bytes]:
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        payload = payload if isinstance(payload, dict) else {}
        name = (headers.get("x-amzn-errortype") or str(payload.get("__type", ""))).split(":")[0]
        name = name.rpartition("#")[2]
        message = payload.get("message") or payload.get("Message")
        if not isinstance(message, str):
            message = f"Bedrock answered HTTP {status}."
        mapped, error = exception_error(name, message, status)
        request_id = headers.get(REQUEST_ID_HEADER)
        if request_id:
            error["request_id"] = request_id
        return mapped, json.dumps(error).encode()

    def answer(self, path: str, body: bytes) -> bytes:
        if path.partition("?")[0] != COUNT_TOKENS_PATH:
            return body
        try:
            count = json.loads(body)["inputTokens"]
        except (ValueError, KeyError, TypeError):
            raise GatewayError(502, "Bedrock's CountTokens answer had no inputTokens.") from None
        return json.dumps({"input_tokens": count}).encode()

    def events(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        return sse_from_event_stream(chunks)

    def downstream(self, headers: httpx2.Headers) -> list[tuple[bytes, bytes]]:
        out = downstream_headers(headers.multi_items())
        if headers.get("content-type", "").startswith(EVENT_STREAM):
            # events() turns the body into SSE: the type says so, as the gateway
            # relays a stream only once it knows its policies can read it.
            out = [(key, value) for key, value in out if key != b"content-type"]
            out.append((b"content-type", SSE_CONTENT_TYPE))
        request_id = headers.get(REQUEST_ID_HEADER)
        if request_id and "request-id" not in headers:
            # Where the SDKs look for the request id (`response._request_id`).
            out.extend(downstream_headers([("request-id", request_id)]))
        return out


def _thinking_budget(raw: str | None) -> int:
    try:
        budget = json.loads(raw)["budget_tokens"] if raw else 0
    except (ValueError, KeyError, TypeError):
        return 0
    return budget if isinstance(budget, int) and budget > 0 else 0
