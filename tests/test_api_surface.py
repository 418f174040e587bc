"""No way around the gateway: every route the installed SDK knows is covered by the policies,
passed through on purpose, or refused; Models pass through; Files only with the switch."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from policy_gateway import settings, surface

from .support.client import HEADERS, error_of, policy_chain, request_body
from .support.fake_resources import MODELS, RAW_CONTENT, lines, succeeded
from .support.fake_upstream import FakeUpstream, Reply, message
from .support.gateway import GatewayFactory
from .support.sdk import sdk

# The SDK client's resources. A new one is a new part of the API: decide what the gateway
# does with it (policies, a deliberate passthrough, or the 404 it gets today), then add it.
KNOWN_RESOURCES = {"messages", "models", "files", "skills", "user_profiles", "organization", "beta"}
BATCH = "/v1/messages/batches/{message_batch_id}"
COVERED = {
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
    ("POST", "/v1/messages/batches"),
    ("GET", f"{BATCH}/results"),
}
PASSED = {
    ("GET", "/v1/messages/batches"),
    ("GET", BATCH),
    ("DELETE", BATCH),
    ("POST", f"{BATCH}/cancel"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/{model_id}"),
}
PROBE = policy_chain(("tests.support.policies:RefuseAll", {}))
_VERB = r"self\._(get|post|put|patch|delete|get_api_list)\("
_CALL = re.compile(_VERB + r"(.*?)span_route=\"([^\"]+)\"", re.S)


def sdk_routes() -> set[tuple[str, str]]:
    """(method, path template) of every call in the installed SDK's resource modules."""
    routes: set[tuple[str, str]] = set()
    for module in (Path(anthropic.__file__).parent / "resources").rglob("*.py"):
        source = module.read_text()
        found = _CALL.findall(source)
        # Every call names its route: if the SDK stops doing so, this walk must be rewritten
        # rather than silently miss routes.
        assert len(found) == len(re.findall(_VERB, source)), module
        for verb, arguments, route in found:
            method = "GET" if verb == "get_api_list" else verb.upper()
            explicit = re.search(r"method=\"(\w+)\"", arguments)
            routes.add((explicit[1].upper() if explicit else method, route))
    return routes


def concrete(template: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: f"{match[1]}_probe", template)


def probe_body(method: str, template: str) -> Any:
    if template == "/v1/messages/batches" and method == "POST":
        return {"requests": [{"custom_id": "probe", "params": request_body()}]}
    return request_body() if method == "POST" else None


def test_the_sdk_has_no_resource_the_gateway_has_not_decided_on() -> None:
    resources = {
        name
        for name, value in vars(anthropic.Anthropic).items()
        if isinstance(value, functools.cached_property) and not name.startswith("with_")
    }
    assert resources == KNOWN_RESOURCES


def test_the_route_table_says_what_the_walk_finds() -> None:
    def declared(coverage: str) -> set[tuple[str, str]]:
        return {
            (method, route.path)
            for route in surface.ROUTES
            if route.coverage == coverage
            for method in route.methods or ("*",)
        }

    assert declared(surface.POLICIES) == COVERED
    assert declared(surface.PASSTHROUGH) == PASSED
    assert {path for _, path in declared(surface.SWITCHED)} == {
        "/v1/files",
        "/v1/files/{file_path:path}",
    }


def test_every_sdk_route_is_covered_passed_on_purpose_or_refused(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=PROBE)
    routes = sdk_routes()
    assert routes >= COVERED | PASSED
    outcomes: dict[str, list[tuple[str, str]]] = {}
    http = httpx2.Client(base_url=url, headers=HEADERS)
    for method, template in sorted(routes):
        upstream.reset()
        if template == f"{BATCH}/results":
            upstream.script(
                Reply(chunks=lines([succeeded("probe", message("hi"))]), content_type="x")
            )
        path = concrete(template)
        body = probe_body(method, template)
        response = http.request(method, path, content=None if body is None else json.dumps(body))
        seen = [(recorded.method, recorded.path) for recorded in upstream.requests]
        if (method, template) in COVERED:
            # The probe policy refuses every request and every response it sees.
            assert "probe: the" in response.text, (method, template, response.text)
            kind = "policies"
        elif (method, template) in PASSED:
            assert seen == [(method, path)], (method, template)
            kind = "passthrough"
        elif template.startswith("/v1/files"):
            assert response.status_code == 403, (method, template)
            assert error_of(response.content)["type"] == "permission_error"
            assert seen == []
            kind = "files refused"
        else:
            assert response.status_code in (404, 405), (method, template, response.status_code)
            assert error_of(response.content)["type"] in (
                "not_found_error",
                "invalid_request_error",
            )
            assert seen == [], (method, template)
            kind = "refused"
        outcomes.setdefault(kind, []).append((method, template))
    http.close()
    assert len(outcomes["policies"]) == len(COVERED)
    assert len(outcomes["passthrough"]) == len(PASSED)
    assert len(outcomes["files refused"]) >= 5
    assert len(outcomes["refused"]) > 100  # the beta and admin APIs, today


def test_models_pass_through_with_the_sdk(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    client = sdk(make_gateway(policy_config=PROBE))
    assert [model.id for model in client.models.list()] == [model["id"] for model in MODELS]
    assert client.models.retrieve("claude-haiku-4-5").display_name == "Claude Haiku 4.5"
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("claude-instant-1.2")
    assert [(r.method, r.path) for r in upstream.requests] == [
        ("GET", "/v1/models"),
        ("GET", "/v1/models/claude-haiku-4-5"),
        ("GET", "/v1/models/claude-instant-1.2"),
    ]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/models/..",
        "/v1/models/%2E%2E",
        "/v1/messages/batches/../results",
        "/v1/messages/batches/%2e%2e",
        "/v1/files/a/../../organizations/api_keys",
    ],
)
def test_dot_segments_never_reach_the_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, path: str
) -> None:
    url = make_gateway(allow_files_api=True)
    response = httpx2.get(url + path, headers=HEADERS)
    assert response.status_code == 404
    assert error_of(response.content)["type"] == "not_found_error"
    assert upstream.requests == []


def test_files_are_refused_by_default_saying_why(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    client = sdk(url)
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        client.beta.files.upload(file=("report.pdf", b"%PDF-1.4", "application/pdf"))
    text = caught.value.body["error"]["message"]  # type: ignore[index]
    assert "no policy can see an uploaded file" in text
    assert settings.ENV_ALLOW_FILES_API in text
    with pytest.raises(anthropic.PermissionDeniedError):
        client.beta.files.list()
    with pytest.raises(anthropic.PermissionDeniedError):
        client.beta.files.download("file_1")
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        response = httpx2.request(method, f"{url}/v1/files/x/y", headers=HEADERS)
        assert response.status_code == 403
    assert upstream.requests == []


def test_files_need_a_valid_gateway_key_even_when_refused(
    keyed_gateway: Any, upstream: FakeUpstream
) -> None:
    url = keyed_gateway()
    response = httpx2.get(f"{url}/v1/files", headers={"x-api-key": "gk-wrong"})
    assert response.status_code == 401
    assert upstream.requests == []


def test_the_switch_passes_files_through_unmodified(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    client = sdk(make_gateway(allow_files_api=True, policy_config=PROBE))
    uploaded = client.beta.files.upload(file=("report.pdf", RAW_CONTENT, "application/pdf"))
    assert uploaded.id == "file_fake_0001"
    upload = upstream.requests[0]
    assert (upload.method, upload.path) == ("POST", "/v1/files")
    assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert RAW_CONTENT in upload.body
    assert [file.id for file in client.beta.files.list()] == ["file_fake_0001"]
    assert client.beta.files.download("file_fake_0001").read() == RAW_CONTENT
    assert client.beta.files.delete("file_fake_0001").type == "file_deleted"
    assert [(r.method, r.path) for r in upstream.requests[1:]] == [
        ("GET", "/v1/files"),
        ("GET", "/v1/files/file_fake_0001/content"),
        ("DELETE", "/v1/files/file_fake_0001"),
    ]


def test_a_files_upload_body_reaches_the_upstream_byte_for_byte(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(allow_files_api=True)
    body = b"--b\r\ncontent-disposition: form-data; name=file\r\n\r\n\x00\xff binary\r\n--b--\r\n"
    response = httpx2.post(
        f"{url}/v1/files",
        content=body,
        headers={**HEADERS, "content-type": "multipart/form-data; boundary=b"},
    )
    assert response.status_code == 200
    [recorded] = upstream.requests
    assert recorded.body == body
    assert recorded.headers["content-type"] == "multipart/form-data; boundary=b"


@pytest.mark.parametrize(("value", "allowed"), [("true", True), ("TRUE", True), ("false", False)])
def test_the_files_switch_reads_true_or_false(value: str, allowed: bool) -> None:
    env = {settings.ENV_ALLOW_FILES_API: value}
    assert settings.Settings.from_env(env).allow_files_api is allowed
    assert settings.Settings.from_env({}).allow_files_api is False


@pytest.mark.parametrize("value", ["yes", "1", "on", "tru"])
def test_an_unreadable_files_switch_stops_the_gateway_at_start(value: str) -> None:
    with pytest.raises(ValueError, match=settings.ENV_ALLOW_FILES_API):
        settings.Settings.from_env({settings.ENV_ALLOW_FILES_API: value})


def test_a_compressed_passthrough_body_is_refused_not_forwarded_undecodable(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(allow_files_api=True)
    response = httpx2.post(
        f"{url}/v1/files",
        content=b"\x1f\x8b compressed",
        headers={
            **HEADERS,
            "content-type": "multipart/form-data; boundary=b",
            "content-encoding": "gzip",
        },
    )
    assert response.status_code == 415
    assert upstream.requests == []
