"""A credential in the URL path never leaves the gateway; scrubbing never mangles text
(issue 21, item 7).

A key used as a path segment (`/v1/models/<key>`, a file or batch id) went to
Anthropic in the request line and into the server span's name and `url.path`.
Such a call is refused before any upstream attempt, and the span shows the
segment redacted. Only credentials long enough to be secrets are scrubbed (a
one-letter key turned "Bedrock" into "Bedroc[redacted]"), and shorter gateway
keys are refused when their secret loads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest
from policy_gateway import settings
from policy_gateway.auth.gateway_keys import (
    MIN_SECRET_LENGTH,
    SecretFormatError,
    parse_gateway_keys,
)
from policy_gateway.auth.path_secrets import redact_path
from policy_gateway.observability import tracing_settings

from .conftest import KEYS_SECRET
from .support.fake_upstream import FakeUpstream, Reply
from .support.gateway import GatewayFactory, GatewayStdout
from .support.servers import ROOT, gateway_process
from .support.traces import SPAN_KIND_SERVER, OTLPReceiver

CLIENT_KEY = "sk-ant-client-key-0123456789abcdef"
GATEWAY_KEY = "gk-one-0123456789abcdef"
VERSION = {"anthropic-version": "2023-06-01"}


def in_path(key: str) -> list[str]:
    return [
        f"/v1/models/{key}",
        f"/v1/models/{quote(key, safe='')}",
        f"/v1/models/{''.join(f'%{ord(c):02X}' for c in key)}",
        f"/v1/messages/batches/{key}",
        f"/v1/messages/batches/{key}/results",
        f"/v1/files/{key}",
        f"/v1/files/{key}/content",
    ]


def test_a_client_key_in_the_path_is_refused_before_any_upstream_attempt(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    url = make_gateway(allow_files_api=True)
    for path in in_path(CLIENT_KEY):
        response = httpx2.get(url + path, headers={"x-api-key": CLIENT_KEY, **VERSION})
        assert response.status_code == 400, path
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert upstream.requests == []
    assert CLIENT_KEY not in gateway_stdout.text
    # The same paths without the key still pass.
    assert httpx2.get(f"{url}/v1/models/claude-x", headers={"x-api-key": CLIENT_KEY, **VERSION})
    assert [request.path for request in upstream.requests] == ["/v1/models/claude-x"]


def test_a_gateway_key_in_the_path_is_refused_before_any_upstream_attempt(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    url = keyed_gateway()
    for path in in_path(GATEWAY_KEY)[:5]:
        response = httpx2.get(url + path, headers={"authorization": f"Bearer {GATEWAY_KEY}"})
        assert response.status_code == 400, path
    assert upstream.requests == []


def test_the_call_span_never_carries_a_key_from_the_path(
    tmp_path: Path, upstream_url: str, otlp: tuple[OTLPReceiver, str]
) -> None:
    receiver, endpoint = otlp
    env = {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_LAMBDA_TASK_ROOT: "",
        tracing_settings.ENV_OTLP_ENDPOINT: endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "PYTHONPATH": str(ROOT),
    }
    with gateway_process(env, stdout_path=tmp_path / "gateway.out") as (url, _):
        response = httpx2.get(
            f"{url}/v1/models/{CLIENT_KEY}", headers={"x-api-key": CLIENT_KEY, **VERSION}
        )
        assert response.status_code == 400
        [span] = [span for span in receiver.spans(expect=1) if span.kind == SPAN_KIND_SERVER]
    assert CLIENT_KEY not in span.name
    assert span.attributes["url.path"] == "/v1/models/[redacted]"
    assert CLIENT_KEY not in json.dumps(span.attributes)
    assert CLIENT_KEY not in (tmp_path / "gateway.out").read_text()


def test_redact_path_blanks_each_segment_that_carries_a_secret() -> None:
    secret = CLIENT_KEY
    assert redact_path(f"/v1/models/{secret}", [secret]) == "/v1/models/[redacted]"
    assert redact_path(f"/v1/files/x{quote(secret)}y/content", [secret]) == (
        "/v1/files/[redacted]/content"
    )
    assert redact_path("/v1/models/claude", [secret]) == "/v1/models/claude"
    assert redact_path("/v1/models/claude", []) == "/v1/models/claude"
    split = f"/v1/{secret[:10]}/{secret[10:]}"
    assert redact_path(split, ["/".join([secret[:10], secret[10:]])]) == "/[redacted]"


def test_a_short_client_key_never_mangles_an_upstream_message(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    message = "Bedrock answered HTTP 404 for model B"
    upstream.script(Reply.error(404, "not_found_error", message))
    response = httpx2.post(
        f"{url}/v1/messages",
        headers={"x-api-key": "B", **VERSION},
        json={"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 404
    assert response.json()["error"]["message"] == message


def test_a_long_client_key_is_still_scrubbed_from_an_upstream_message(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(Reply.error(401, "authentication_error", f"invalid x-api-key {CLIENT_KEY}"))
    response = httpx2.post(
        f"{url}/v1/messages",
        headers={"x-api-key": CLIENT_KEY, **VERSION},
        json={"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.json()["error"]["message"] == "invalid x-api-key [redacted]"


def test_a_short_gateway_key_is_refused_when_its_secret_loads(
    keyed_gateway: Callable[..., str],
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
) -> None:
    short = "x" * (MIN_SECRET_LENGTH - 1)
    with pytest.raises(SecretFormatError, match=f"'alice' is shorter than {MIN_SECRET_LENGTH}"):
        parse_gateway_keys(json.dumps({"keys": [{"name": "alice", "key": short}]}))
    assert parse_gateway_keys(json.dumps(["x" * MIN_SECRET_LENGTH]))
    url = keyed_gateway({"keys": [GATEWAY_KEY, {"name": "alice", "key": short}]})
    response = httpx2.post(
        f"{url}/v1/messages",
        headers={"x-api-key": short, **VERSION},
        json={"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 500
    assert upstream.requests == []
    refused = [line for line in gateway_stdout.lines() if line.get("secret") == KEYS_SECRET]
    assert refused
    assert all("'alice' is shorter than" in line["reason"] for line in refused)
    assert short not in gateway_stdout.text
