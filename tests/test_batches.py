"""Message Batches through the gateway with the official SDK: request policies on every entry,
batch objects pointing back at the gateway, results through the response policies."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx2
import psutil
import pytest
from gateway_policies import recorder
from policy_gateway import lambda_context, settings, surface
from policy_gateway.errors import GatewayError
from policy_gateway.routes.batches import public_base, rewrite_results_urls

from .conftest import UPSTREAM_KEY
from .support.client import HEADERS, error_of, policy_chain
from .support.fake_resources import errored, succeeded
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message
from .support.faulty_policies import INTERNALS
from .support.gateway import GatewayFactory, GatewayStdout
from .support.routes import requests_for
from .support.sdk import client, sdk
from .support.servers import gateway_process

SECRET = "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"
PER_ENTRY = policy_chain(
    ("redact_secrets", {}),
    ("rewrite_model", {"map": {"claude-opus-4-1": MODEL}}),
    ("cap_max_tokens", {"max": 100}),
    ("strip_tools", {"names": ["bash"]}),
)
BLOCK_BASH = policy_chain(("block_tool_calls", {"rules": [{"tool": "^bash$"}]}))
REFUSE_FORBIDDEN = policy_chain(("tests.support.policies:RefuseWord", {"word": "forbidden"}))
TOOLS = [
    {"name": "bash", "input_schema": {"type": "object"}},
    {"name": "search", "input_schema": {"type": "object"}},
]


def params(text: str, **extra: Any) -> Any:
    """A Messages request body (typed loosely: the SDK's TypedDicts reject test-made dicts)."""
    return {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}]} | (
        extra
    )


def tool_message(name: str, args: dict[str, Any], text: str = "let me check") -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": text},
        {"type": "tool_use", "id": "toolu_1", "name": name, "input": args},
    ]
    return message("", content=content) | {"stop_reason": "tool_use"}


def raw_results(url: str, batch_id: str) -> httpx2.Response:
    return httpx2.get(f"{url}/v1/messages/batches/{batch_id}/results", headers=HEADERS)


# ----------------------------------------------------------------- create: request policies


def test_every_entry_passes_the_request_policies(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    client = sdk(make_gateway(policy_config=PER_ENTRY))
    batch = client.messages.batches.create(
        requests=[
            {
                "custom_id": "with-secret",
                "params": params(
                    f"deploy with {SECRET}", model="claude-opus-4-1", max_tokens=4096, tools=TOOLS
                ),
            },
            {"custom_id": "plain", "params": params("hello", max_tokens=50)},
        ]
    )
    assert batch.id == "msgbatch_fake_0001"
    [recorded] = upstream.requests
    assert recorded.path == "/v1/messages/batches"
    assert SECRET.encode() not in recorded.body
    first, second = (entry["params"] for entry in recorded.json["requests"])
    assert first["messages"][0]["content"] == "deploy with [REDACTED:anthropic_api_key]"
    assert first["model"] == MODEL
    assert first["max_tokens"] == 100
    assert [tool["name"] for tool in first["tools"]] == ["search"]
    assert second == params("hello", max_tokens=50)
    assert [entry["custom_id"] for entry in recorded.json["requests"]] == ["with-secret", "plain"]


def test_redaction_is_never_bypassed_by_the_fallback_in_a_batch(
    make_gateway: GatewayFactory, upstream: FakeUpstream, set_flag: Callable[[str], None]
) -> None:
    set_flag("true")
    client = sdk(make_gateway(policy_config=PER_ENTRY))
    upstream.script(Reply.error(400, "invalid_request_error", "requests: too many"))
    with pytest.raises(anthropic.BadRequestError, match="too many"):
        client.messages.batches.create(
            requests=[{"custom_id": "a", "params": params(f"key {SECRET}")}]
        )
    [recorded] = upstream.requests
    assert SECRET.encode() not in recorded.body


def test_a_refused_entry_refuses_the_batch_and_is_named(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    client = sdk(make_gateway(policy_config=REFUSE_FORBIDDEN))
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        client.messages.batches.create(
            requests=[
                {"custom_id": "fine", "params": params("hello")},
                {"custom_id": "entry-7", "params": params("something forbidden")},
            ]
        )
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "permission_error"
    assert "'entry-7'" in error["message"]
    assert "requests[1]" in error["message"]
    assert "forbidden" in error["message"]
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ("tests.support.faulty_policies:ExplodeOnRequest", "ExplodeOnRequest"),
        ("tests.support.policies:FlipStream", "<chain>"),
    ],
    ids=["raises", "changes-stream"],
)
def test_a_crashing_policy_refuses_the_batch_naming_the_entry(
    make_gateway: GatewayFactory, upstream: FakeUpstream, policy: str, named: str
) -> None:
    client = sdk(make_gateway(policy_config=policy_chain((policy, {}))))
    with pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.batches.create(requests=[{"custom_id": "only", "params": params("hi")}])
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "api_error"
    assert "'only'" in error["message"]
    assert named in error["message"]
    assert INTERNALS not in error["message"]
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"requests": []}, "requests"),
        ({"requests": "all of them"}, "requests"),
        ({}, "requests"),
        ({"requests": ["text"]}, "requests[0]"),
        ({"requests": [{"params": params("hi")}]}, "requests[0].custom_id"),
        ({"requests": [{"custom_id": "a", "params": "hi"}]}, "'a'"),
        (
            {"requests": [{"custom_id": "a", "params": params("hi"), "x": 1}, {"custom_id": "b"}]},
            "'b'",
        ),
        ({"requests": [{"custom_id": "s", "params": params("hi", stream=True)}]}, "'s'"),
        ({"requests": [{"custom_id": "s", "params": params("hi", stream="yes")}]}, "stream"),
    ],
    ids=[
        "empty",
        "not-a-list",
        "missing",
        "entry-not-object",
        "no-custom-id",
        "params-not-object",
        "no-params",
        "stream-true",
        "stream-odd",
    ],
)
def test_malformed_or_streaming_entries_are_refused_before_the_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, body: dict[str, Any], named: str
) -> None:
    url = make_gateway(policy_config=PER_ENTRY)
    response = httpx2.post(url + "/v1/messages/batches", json=body, headers=HEADERS)
    assert response.status_code == 400
    assert named in error_of(response.content)["message"]
    assert upstream.requests == []


def test_batch_body_limit_is_the_gateways(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    entry = {"custom_id": "big", "params": params("x" * 1_000_000)}
    body = {"requests": [entry] * 7}
    response = httpx2.post(url + "/v1/messages/batches", json=body, headers=HEADERS)
    assert response.status_code == 413
    assert error_of(response.content)["type"] == "request_too_large"
    assert upstream.requests == []


def test_the_upstream_reads_the_batch_the_policies_read(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    """Even with no request hook in the chain: a key given twice is never forwarded for the
    upstream to read its own way (refused, or sent once, as the gateway parsed it)."""
    url = make_gateway(policy_config=REFUSE_FORBIDDEN)
    raw = (
        b'{"requests": [{"custom_id": "a", "params": {"model": "m", "max_tokens": 1,'
        b' "messages": [{"role": "user", "content": "forbidden"}],'
        b' "messages": [{"role": "user", "content": "fine"}]}}]}'
    )
    response = httpx2.post(url + "/v1/messages/batches", content=raw, headers=HEADERS)
    if response.status_code == 400:
        assert upstream.requests == []
        return
    assert response.status_code == 200
    [recorded] = upstream.requests
    assert recorded.body.count(b'"messages"') == 1
    assert b"forbidden" not in recorded.body


# ------------------------------------------------------------ batch objects and results_url


def test_every_batch_object_points_results_back_at_the_gateway(
    make_gateway: GatewayFactory, upstream: FakeUpstream, upstream_url: str
) -> None:
    url = make_gateway(public_url="https://gateway.example.com/base/")
    client = sdk(url)
    created = client.messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    upstream_batch = upstream.resources.batches[created.id]
    assert upstream_batch["results_url"].startswith(upstream_url)
    ours = f"https://gateway.example.com/base/v1/messages/batches/{created.id}/results"
    assert created.results_url == ours
    assert client.messages.batches.retrieve(created.id).results_url == ours
    listed = client.messages.batches.list()
    assert [batch.results_url for batch in listed.data] == [ours]
    assert client.messages.batches.cancel(created.id).results_url == ours
    deleted = client.messages.batches.delete(created.id)
    assert deleted.type == "message_batch_deleted"
    assert [(r.method, r.path) for r in upstream.requests] == [
        ("POST", "/v1/messages/batches"),
        ("GET", f"/v1/messages/batches/{created.id}"),
        ("GET", "/v1/messages/batches"),
        ("POST", f"/v1/messages/batches/{created.id}/cancel"),
        ("DELETE", f"/v1/messages/batches/{created.id}"),
    ]


@pytest.mark.parametrize(
    ("trusted", "expected"),
    [(True, "https://abc123.lambda-url.eu-west-1.on.aws"), (False, "")],
    ids=["in-lambda", "elsewhere"],
)
def test_results_url_host_comes_from_lambda_never_from_the_client(
    make_gateway: GatewayFactory, upstream: FakeUpstream, trusted: bool, expected: str
) -> None:
    url = make_gateway(trust_lambda_context=trusted)
    sdk(url).messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    context = {"requestId": "r-1", "domainName": "abc123.lambda-url.eu-west-1.on.aws"}
    response = httpx2.get(
        url + "/v1/messages/batches/msgbatch_fake_0001",
        headers={
            **HEADERS,
            "host": "evil.example",
            "x-forwarded-host": "evil.example",
            "x-amzn-request-context": json.dumps(context),
        },
    )
    path = "/v1/messages/batches/msgbatch_fake_0001/results"
    assert response.json()["results_url"] == expected + path


def test_list_query_and_beta_client_pass_through(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    client = sdk(make_gateway())
    client.messages.batches.list(limit=5, after_id="msgbatch_x")
    client.beta.messages.batches.list(limit=2, betas=["message-batches-2024-09-24"])
    first, second = upstream.requests
    assert dict(httpx2.QueryParams(first.query)) == {"limit": "5", "after_id": "msgbatch_x"}
    assert dict(httpx2.QueryParams(second.query))["limit"] == "2"
    assert second.headers["anthropic-beta"] == "message-batches-2024-09-24"


def test_an_unreadable_batch_object_fails_closed(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway()
    upstream.script(Reply(raw=b"<html>results at https://elsewhere/</html>"))
    response = httpx2.get(url + "/v1/messages/batches/msgbatch_1", headers=HEADERS)
    assert response.status_code == 502
    assert b"elsewhere" not in response.content


def test_batch_errors_reach_the_client_with_credentials_scrubbed(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    url = keyed_gateway()
    upstream.script(Reply.error(404, "not_found_error", f"no batch for key {UPSTREAM_KEY}"))
    with pytest.raises(anthropic.NotFoundError) as caught:
        client(url, api_key="gk-one-0123456789abcdef").messages.batches.retrieve("msgbatch_missing")
    assert caught.value.body["error"]["message"] == "no batch for key [redacted]"  # type: ignore[index]


def test_gateway_keys_guard_every_route_and_never_reach_the_upstream(
    keyed_gateway: Callable[..., str], upstream: FakeUpstream
) -> None:
    url = keyed_gateway()
    for method, path in requests_for(surface.ROUTES):
        response = httpx2.request(method, url + path, headers={"x-api-key": "gk-wrong"})
        assert response.status_code == 401, (method, path)
    assert upstream.requests == []
    keyed = client(url, api_key="gk-one-0123456789abcdef")
    batch = keyed.messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    assert [entry.custom_id for entry in keyed.messages.batches.results(batch.id)] == ["a"]
    assert [r.headers["x-api-key"] for r in upstream.requests] == [UPSTREAM_KEY] * 3


def test_public_base_never_comes_from_the_client() -> None:
    plain = settings.Settings()
    lambda_ = settings.Settings(trust_lambda_context=True)
    context = lambda_context.InvocationContext(url_domain="abc.lambda-url.eu-west-1.on.aws")
    assert public_base(plain, context) == ""
    assert public_base(lambda_, context) == "https://abc.lambda-url.eu-west-1.on.aws"
    for forged in ("evil.example/x", "a b", "evil.example@", "-x", ""):
        assert public_base(lambda_, lambda_context.InvocationContext(url_domain=forged)) == ""
    configured = settings.Settings(public_url="https://llm.example.com/", trust_lambda_context=True)
    assert public_base(configured, context) == "https://llm.example.com"


def test_results_url_rewrite_keeps_path_and_query_and_refuses_garbage() -> None:
    body = json.dumps(
        {"id": "b", "results_url": "https://api.anthropic.com/v1/messages/batches/b/results?x=1"}
    ).encode()
    assert json.loads(rewrite_results_urls(body, ""))["results_url"] == (
        "/v1/messages/batches/b/results?x=1"
    )
    untouched = json.dumps({"id": "b", "results_url": None}).encode()
    assert rewrite_results_urls(untouched, "https://gw") == untouched
    for garbage in (b"[]", b"not json", b'"https://api.anthropic.com/"'):
        with pytest.raises(GatewayError) as caught:
            rewrite_results_urls(garbage, "")
        assert caught.value.status == 502


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({settings.ENV_GATEWAY_PUBLIC_URL: "gateway.example.com"}, "GATEWAY_PUBLIC_URL"),
        ({settings.ENV_GATEWAY_PUBLIC_URL: "https://gw.example.com/?a=1"}, "GATEWAY_PUBLIC_URL"),
    ],
)
def test_a_bad_public_url_stops_the_gateway_at_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings.Settings.from_env(env)


# ----------------------------------------------------------------- results: response policies


def test_results_pass_the_response_policies_through_the_sdk(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    upstream.resources.results["msgbatch_fake_0001"] = [
        succeeded("blocked", tool_message("bash", {"command": "rm -rf /"})),
        succeeded("allowed", tool_message("search", {"q": "weather"})),
        errored("failed"),
        {"custom_id": "canceled", "result": {"type": "canceled"}},
        {"custom_id": "expired", "result": {"type": "expired"}},
    ]
    client = sdk(make_gateway(policy_config=BLOCK_BASH))
    batch = client.messages.batches.create(
        requests=[{"custom_id": name, "params": params("hi")} for name in ("a", "b")]
    )
    assert batch.results_url == f"/v1/messages/batches/{batch.id}/results"
    results = {entry.custom_id: entry.result for entry in client.messages.batches.results(batch.id)}
    blocked = results["blocked"]
    assert blocked.type == "succeeded"
    assert [block.type for block in blocked.message.content] == ["text", "text"]
    replacement = blocked.message.content[1]
    assert replacement.type == "text"
    assert "block_tool_calls blocked a call to tool 'bash'" in replacement.text
    assert blocked.message.stop_reason == "end_turn"
    allowed = results["allowed"]
    assert allowed.type == "succeeded"
    assert [block.type for block in allowed.message.content] == ["text", "tool_use"]
    assert allowed.message.stop_reason == "tool_use"
    failed = results["failed"]
    assert failed.type == "errored"
    assert failed.error.error.type == "not_found_error"
    assert results["canceled"].type == "canceled"
    assert results["expired"].type == "expired"
    # The SDK fetched the results through the gateway: the upstream saw the gateway's call.
    assert upstream.requests[-1].path == f"/v1/messages/batches/{batch.id}/results"
    beta = {
        entry.custom_id: entry.result for entry in client.beta.messages.batches.results(batch.id)
    }
    assert beta["blocked"].type == "succeeded"
    assert beta["blocked"].message.stop_reason == "end_turn"
    assert upstream.requests[-1].path == f"/v1/messages/batches/{batch.id}/results"


def test_only_succeeded_entries_change_the_rest_pass_byte_for_byte(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    entries = [
        errored("e"),
        succeeded("s", tool_message("bash", {"command": "ls"})),
        {"custom_id": "c", "result": {"type": "canceled"}},
        {"custom_id": "x", "result": {"type": "expired"}},
        {"custom_id": "n", "result": {"type": "some_future_type", "detail": [1, 2.50]}},
    ]
    upstream.resources.results["msgbatch_fake_0001"] = entries
    url = make_gateway(policy_config=BLOCK_BASH)
    sdk(url).messages.batches.create(requests=[{"custom_id": "s", "params": params("hi")}])
    response = raw_results(url, "msgbatch_fake_0001")
    assert response.status_code == 200
    sent = [json.dumps(entry).encode() for entry in entries]
    got = response.content.split(b"\n")
    assert got[-1] == b""
    assert [got[0], *got[2:5]] == [sent[0], *sent[2:5]]
    assert got[1] != sent[1]
    assert json.loads(got[1])["result"]["message"]["stop_reason"] == "end_turn"


def test_a_refused_result_becomes_an_errored_entry(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    upstream.resources.results["msgbatch_fake_0001"] = [
        succeeded("ok", message("all good")),
        succeeded("bad", message("the forbidden plan")),
    ]
    client = sdk(make_gateway(policy_config=REFUSE_FORBIDDEN))
    batch = client.messages.batches.create(requests=[{"custom_id": "ok", "params": params("hi")}])
    results = {entry.custom_id: entry.result for entry in client.messages.batches.results(batch.id)}
    assert results["ok"].type == "succeeded"
    refused = results["bad"]
    assert refused.type == "errored"
    assert refused.error.error.type == "permission_error"
    assert "forbidden" in refused.error.error.message
    assert "forbidden plan" not in json.dumps(refused.model_dump())


@pytest.mark.parametrize(
    "bad_line",
    [b"not json at all", b"[1, 2]", b'{"custom_id": "x"}', b'{"custom_id": "x", "result": "ok"}'],
    ids=["not-json", "not-object", "no-result", "result-not-object"],
)
def test_an_unreadable_first_line_is_a_502_and_nothing_passes(
    make_gateway: GatewayFactory, upstream: FakeUpstream, bad_line: bytes
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    sdk(url).messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    good = json.dumps(succeeded("a", message("fine"))).encode() + b"\n"
    upstream.resources.results["msgbatch_fake_0001"] = lambda: iter([bad_line + b"\n", good])
    response = raw_results(url, "msgbatch_fake_0001")
    assert response.status_code == 502
    assert "withheld" in error_of(response.content)["message"]
    assert b"fine" not in response.content


def test_a_withheld_lines_custom_id_is_logged_bounded(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gateway_stdout: GatewayStdout
) -> None:
    """Review: the withholding WARNING logged a results line's `custom_id` (the client's word,
    echoed by the upstream) whole: 100 KB holding a key went into the log."""
    url = make_gateway(policy_config=BLOCK_BASH)
    sdk(url).messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    planted = "a" * 50_000 + SECRET + "b" * 50_000
    bad_line = json.dumps({"custom_id": planted, "result": "ok"}).encode()
    upstream.resources.results["msgbatch_fake_0001"] = lambda: iter([bad_line + b"\n"])
    assert raw_results(url, "msgbatch_fake_0001").status_code == 502
    gateway_stdout.call_lines(2)
    (withheld,) = [
        line for line in gateway_stdout.lines() if "withholding" in line.get("message", "")
    ]
    assert withheld["custom_id"] == recorder.text(planted)
    assert SECRET not in gateway_stdout.text


def test_an_unreadable_later_line_cuts_the_stream(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    sdk(url).messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    good = json.dumps(succeeded("a", message("first"))).encode() + b"\n"
    later = json.dumps(succeeded("c", message("after"))).encode() + b"\n"
    upstream.resources.results["msgbatch_fake_0001"] = lambda: iter([good, b"{oops\n", later])
    received = bytearray()

    def read_all() -> None:
        with httpx2.stream(
            "GET", f"{url}/v1/messages/batches/msgbatch_fake_0001/results", headers=HEADERS
        ) as response:
            assert response.status_code == 200
            for chunk in response.iter_bytes():
                received.extend(chunk)

    with pytest.raises(httpx2.RemoteProtocolError):
        read_all()
    assert b"first" in received
    assert b"oops" not in received
    assert b"after" not in received


def test_a_succeeded_entry_without_a_readable_message_is_withheld(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    sdk(url).messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    upstream.resources.results["msgbatch_fake_0001"] = [
        {"custom_id": "odd", "result": {"type": "succeeded", "message": "rm -rf /"}}
    ]
    response = raw_results(url, "msgbatch_fake_0001")
    [entry] = [json.loads(line) for line in response.content.splitlines()]
    assert entry["custom_id"] == "odd"
    assert entry["result"]["type"] == "errored"
    assert "rm -rf" not in response.text


def test_without_response_hooks_results_pass_unread(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=policy_chain(("redact_secrets", {})))
    sdk(url).messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    upstream.resources.results["msgbatch_fake_0001"] = lambda: iter([b"anything\n", b"at all"])
    response = raw_results(url, "msgbatch_fake_0001")
    assert response.status_code == 200
    assert response.content == b"anything\nat all"


def test_a_last_line_without_newline_is_judged_too(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    sdk(url).messages.batches.create(requests=[{"custom_id": "a", "params": params("hi")}])
    last = json.dumps(succeeded("t", tool_message("bash", {"command": "id"}))).encode()
    upstream.resources.results["msgbatch_fake_0001"] = lambda: iter([last[:10], last[10:]])
    response = raw_results(url, "msgbatch_fake_0001")
    assert not response.content.endswith(b"\n")
    assert json.loads(response.content)["result"]["message"]["stop_reason"] == "end_turn"


def test_results_errors_from_the_upstream_reach_the_client(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    url = make_gateway(policy_config=BLOCK_BASH)
    upstream.script(Reply.error(404, "not_found_error", "batch has no results yet"))
    response = raw_results(url, "msgbatch_nope")
    assert response.status_code == 404
    assert error_of(response.content)["message"] == "batch has no results yet"


# ------------------------------------------------------------------ a large results file

RESULT_LINES = 10_000
PADDING = "lorem ipsum dolor sit amet " * 180  # about 5 KB per line, 50 MB in all
RSS_GROWTH_LIMIT = 20 * 1024 * 1024


def large_results(count: int) -> Callable[[], Iterator[bytes]]:
    """A results file of `count` lines, made as it is sent; every tenth entry calls bash."""

    def produce() -> Iterator[bytes]:
        for index in range(count):
            if index % 10 == 0:
                entry = succeeded(f"r{index}", tool_message("bash", {"command": "ls"}, PADDING))
            else:
                entry = succeeded(f"r{index}", message(PADDING))
            yield json.dumps(entry).encode() + b"\n"

    return produce


class PeakRSS:
    """The highest resident set size of a process while the block runs, sampled every 10 ms."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def test_a_10000_line_results_file_streams_in_flat_memory(
    upstream: FakeUpstream, upstream_url: str
) -> None:
    """A gateway process (as Lambda runs it) relays 50 MB of results through block_tool_calls
    holding one line at a time: its resident memory does not grow with the file."""
    env = {"UPSTREAM_BASE_URL": upstream_url, "POLICY_CONFIG": BLOCK_BASH}
    with gateway_process(env) as (url, process):
        client = sdk(url, timeout=120)
        upstream.resources.results["msgbatch_fake_0001"] = large_results(500)
        upstream.resources.results["msgbatch_fake_0002"] = large_results(RESULT_LINES)
        warm = client.messages.batches.create(requests=[{"custom_id": "w", "params": params("")}])
        assert sum(1 for _ in client.messages.batches.results(warm.id)) == 500
        baseline = psutil.Process(process.pid).memory_info().rss
        batch = client.messages.batches.create(requests=[{"custom_id": "b", "params": params("")}])
        seen = blocked = 0
        with PeakRSS(process.pid) as rss:
            for entry in client.messages.batches.results(batch.id):
                assert entry.result.type == "succeeded"
                assert entry.custom_id == f"r{seen}"
                kinds = [block.type for block in entry.result.message.content]
                if seen % 10 == 0:
                    assert kinds == ["text", "text"]
                    blocked += 1
                else:
                    assert kinds == ["text"]
                seen += 1
    assert (seen, blocked) == (RESULT_LINES, RESULT_LINES // 10)
    growth = rss.peak - baseline
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew {growth / 2**20:.1f} MB over a 50 MB file"
