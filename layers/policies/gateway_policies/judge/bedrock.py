"""The Amazon Bedrock provider: the judge's request as InvokeModel, signed with SigV4.

The function's own role pays for the judge (the standard AWS credential
chain: in Lambda, the role's credentials; elsewhere the environment or the
profile), so no key is stored. The body is the Messages API request in the
form Bedrock's Anthropic models take: no `model` (it is in the path), no
`stream`, `anthropic_version: bedrock-2023-05-31`; the verdict tool and the
`tool_choice` that forces it travel unchanged. The answer is Messages API
JSON already.

`model` must be a Bedrock model or inference-profile ID
(`us.anthropic.claude-haiku-4-5-20251001-v1:0`) or ARN: the template's
`JudgeBedrockModel` parameter grants `bedrock:InvokeModel` on exactly that
model. The region is the function's (`AWS_REGION`, or the AWS configuration's);
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, the AWS SDKs' own variable, points the
calls at a stand-in. botocore is imported with the first Bedrock judge call
(it is in every Lambda runtime), never by a chain that judges with Anthropic.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx2

from .errors import STATUS, UNAVAILABLE, JudgeError
from .http import HttpProvider, json_body

if TYPE_CHECKING:
    from botocore.credentials import Credentials

    from ..base import PolicyContext
    from .prompt import JudgeRequest

SIGNING_NAME = "bedrock"
ANTHROPIC_VERSION = "bedrock-2023-05-31"
ENV_ENDPOINT_URL = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
SIGNED_HEADERS = ("host", "content-type", "accept")

_PART = r"[A-Za-z0-9][A-Za-z0-9_-]*"
_DOTTED = rf"{_PART}(?:[.:]{_PART})*"
_MODEL_ID = re.compile(
    rf"{_PART}\.{_DOTTED}|arn:aws(?:-[a-z]+)*:bedrock:[a-z0-9-]{{0,20}}:(?:[0-9]{{12}})?:"
    rf"[a-z-]+/{_DOTTED}(?:/{_DOTTED})?"
)
"""A Bedrock model or inference-profile ID, or a Bedrock ARN: every part starts with a
letter or a digit, so no `.`/`..` segment can send the signed request elsewhere."""


def is_bedrock_model(model: str) -> bool:
    return len(model) <= 2048 and _MODEL_ID.fullmatch(model) is not None


def invoke_body(request: JudgeRequest) -> dict[str, Any]:
    """The InvokeModel body for `request`: the Messages body as Bedrock's Anthropic models
    take it."""
    body = request.messages_body()
    body.pop("model", None)
    body.pop("stream", None)
    body["anthropic_version"] = ANTHROPIC_VERSION
    return body


class BedrockProvider(HttpProvider):
    name = "bedrock"

    _credentials: Credentials | None = None
    _region: str | None = None

    def status_error(self, response: httpx2.Response) -> JudgeError:
        # Bedrock names its exception in a header; its message can repeat the body.
        kind = response.headers.get("x-amzn-errortype", "").split(":")[0] or "an error"
        status = response.status_code
        return JudgeError(STATUS, f"Bedrock answered {status} ({kind[:64]})", status=status)

    def _aws(self) -> tuple[Credentials, str]:
        """The role's credentials and the region, read once (botocore refreshes the former)."""
        if self._credentials is None or self._region is None:
            from botocore.session import Session

            session = Session()
            credentials = session.get_credentials()
            region = session.get_config_variable("region")
            if credentials is None:
                raise JudgeError(UNAVAILABLE, "no AWS credentials to call Bedrock with")
            if not region:
                raise JudgeError(UNAVAILABLE, "no AWS region (AWS_REGION) to call Bedrock in")
            self._credentials, self._region = credentials, region
        return self._credentials, self._region

    def _url(self, region: str) -> str:
        suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
        endpoint = os.environ.get(ENV_ENDPOINT_URL) or f"https://bedrock-runtime.{region}{suffix}"
        model = quote(self.options.model, safe="")
        return f"{endpoint.rstrip('/')}/model/{model}/invoke"

    async def _signed(self, body: bytes) -> tuple[str, dict[str, str]]:
        """The URL and headers of an InvokeModel call carrying `body`, signed for `bedrock`."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import RefreshableCredentials

        # Credentials, a refresh included, may call STS or the container endpoint.
        credentials, region = await asyncio.to_thread(self._aws)
        if isinstance(credentials, RefreshableCredentials) and credentials.refresh_needed():
            frozen = await asyncio.to_thread(credentials.get_frozen_credentials)
        else:
            frozen = credentials.get_frozen_credentials()
        url = self._url(region)
        headers = {
            "host": httpx2.URL(url).netloc.decode("ascii"),
            "content-type": "application/json",
            "accept": "application/json",
        }
        signed = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(frozen, SIGNING_NAME, region).add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = signed.headers.get(name)
            if value is not None:
                headers[name] = value
        return url, headers

    async def send(
        self, request: JudgeRequest, ctx: PolicyContext, seconds: float
    ) -> Mapping[str, Any]:
        if not is_bedrock_model(self.options.model):
            raise JudgeError(
                UNAVAILABLE, "model is not a Bedrock model or inference-profile ID, or an ARN"
            )
        body = json_body(invoke_body(request))
        url, headers = await self._signed(body)
        return await self.post(url, body, headers, seconds)
