"""SnapStart through the Web Adapter's hooks (issue 27), driven on real gateway processes.

The adapter's part is played by the test: it POSTs the before-checkpoint hook,
then, as though the snapshot had been resumed days later, changes the flag,
the chain, both secrets and the AWS credentials, and POSTs the after-restore
hook, as the adapter does, from loopback and without the headers of a
forwarded invocation. SSM and Secrets Manager are moto behind a recording
proxy; the credentials come from a container credentials endpoint, as
SnapStart provides them.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest
from policy_gateway import names, settings
from policy_gateway.observability import metrics, tracing, tracing_settings

from .conftest import KEYS_SECRET, UPSTREAM_SECRET, PutSecret
from .support.aws import AWSProxy, ContainerCredentials, gateway_env, wait_until
from .support.client import HEADERS, policy_chain, request_body
from .support.fake_upstream import MODEL, FakeUpstream, Reply
from .support.gateway import GatewayStdout
from .support.sdk import REPLACE, USER, reject_the_rewrite
from .support.servers import gateway_process, serving
from .support.traces import OTLPReceiver, XRayEndpoint

BEFORE = settings.DEFAULT_SNAPSTART_BEFORE_CHECKPOINT_PATH
AFTER = settings.DEFAULT_SNAPSTART_AFTER_RESTORE_PATH
HOOKS_ON = {settings.ENV_SNAPSTART_HOOKS: "true"}
CHAIN = settings.DEFAULT_POLICY_CONFIG_PARAMETER
FLAG = settings.DEFAULT_FLAG_PARAMETER
GET_PARAMETERS = "AmazonSSM.GetParameters"
GET_SECRET = "secretsmanager.GetSecretValue"
# Gateway keys as the keys secret requires them: long enough to be random.
KEY_AT_SNAPSHOT = "gk-at-snapshot-0123456789"
KEY_NOW = "gk-after-restore-0123456789"
MESSAGE: anthropic.types.MessageParam = {"role": "user", "content": "hello"}


def rewrite_to(model: str) -> str:
    """A chain with a request hook, so that a fallback is possible and the flag is read."""
    return policy_chain(("rewrite_model", {"map": {MODEL: model}}))


def hook(url: str, path: str) -> httpx2.Response:
    """A hook call as the adapter makes it: an empty POST, straight to the app on loopback."""
    return httpx2.post(url + path, timeout=30)


@pytest.fixture
def credentials() -> Iterator[tuple[ContainerCredentials, str]]:
    endpoint = ContainerCredentials("AKIDBEFORESNAPSHOT")
    with serving(endpoint) as server:
        yield endpoint, server.url


def test_a_restored_gateway_rereads_everything_and_reconnects(
    aws_proxy: tuple[AWSProxy, str],
    credentials: tuple[ContainerCredentials, str],
    upstream: FakeUpstream,
    upstream_url: str,
    ssm: Any,
    put_secret: PutSecret,
) -> None:
    proxy, aws_url = aws_proxy
    creds, creds_url = credentials
    ssm.put_parameter(Name=CHAIN, Value=rewrite_to("model-at-snapshot"), Type="String")
    ssm.put_parameter(Name=FLAG, Value="false", Type="String")
    put_secret(KEYS_SECRET, json.dumps({"keys": [KEY_AT_SNAPSHOT]}))
    put_secret(UPSTREAM_SECRET, "sk-ant-at-snapshot")
    env = gateway_env(
        upstream_url,
        aws_url,
        **HOOKS_ON,
        **creds.env(creds_url),
        **{
            settings.ENV_AUTH_MODE: settings.AUTH_GATEWAY_KEY,
            settings.ENV_GATEWAY_KEYS_SECRET: KEYS_SECRET,
            settings.ENV_UPSTREAM_API_KEY_SECRET: UPSTREAM_SECRET,
        },
    )
    with gateway_process(env) as (url, _):
        before = anthropic.Anthropic(base_url=url, api_key=KEY_AT_SNAPSHOT, max_retries=0)
        before.messages.create(model=MODEL, max_tokens=8, messages=[MESSAGE])
        (first,) = upstream.requests
        assert first.json["model"] == "model-at-snapshot"
        assert first.headers["x-api-key"] == "sk-ant-at-snapshot"
        assert hook(url, BEFORE).json() == {"status": "ok", "hook": "before-checkpoint"}

        # Days later, in a new environment: every value and the credentials changed.
        ssm.put_parameter(Name=CHAIN, Value=rewrite_to("model-now"), Type="String", Overwrite=True)
        ssm.put_parameter(Name=FLAG, Value="true", Type="String", Overwrite=True)
        put_secret(KEYS_SECRET, json.dumps({"keys": [KEY_NOW]}))
        put_secret(UPSTREAM_SECRET, "sk-ant-now")
        creds.access_key_id = "AKIDAFTERRESTORE"
        read_before = len(proxy.calls)
        answer = hook(url, AFTER)
        assert answer.status_code == 200, answer.text
        restored_reads = proxy.calls[read_before:]
        # Chain and flag (one call) and both secrets, read again before the hook answered,
        # with credentials the runtime's provider handed out after the restore.
        assert sorted(call.operation for call in restored_reads) == sorted(
            [GET_PARAMETERS, GET_SECRET, GET_SECRET]
        )
        assert {call.access_key_id for call in restored_reads} == {"AKIDAFTERRESTORE"}
        assert httpx2.get(url + "/healthz").status_code == 200

        # The upstream refuses the rewritten request: with the flag now on, the
        # original goes as the fallback.
        upstream.script(Reply.error(400, "invalid_request_error"))
        after = anthropic.Anthropic(base_url=url, api_key=KEY_NOW, max_retries=0)
        after.messages.create(model=MODEL, max_tokens=8, messages=[MESSAGE])
        rewritten, fallback = upstream.requests[1:]
        assert rewritten.json["model"] == "model-now"
        assert fallback.json["model"] == MODEL
        assert {rewritten.headers["x-api-key"], fallback.headers["x-api-key"]} == {"sk-ant-now"}
        assert rewritten.connection != first.connection
        # No AWS read on the call itself: the hook made them all.
        assert len(proxy.calls) == read_before + len(restored_reads)
        with pytest.raises(anthropic.AuthenticationError):
            before.messages.create(model=MODEL, max_tokens=8, messages=[MESSAGE])


def test_healthz_is_not_ready_until_the_restore_is_done(
    aws_proxy: tuple[AWSProxy, str], upstream_url: str, ssm: Any
) -> None:
    proxy, aws_url = aws_proxy
    ssm.put_parameter(Name=CHAIN, Value=rewrite_to("model-a"), Type="String")
    ssm.put_parameter(Name=FLAG, Value="false", Type="String")
    with gateway_process(gateway_env(upstream_url, aws_url, **HOOKS_ON)) as (url, _):
        assert hook(url, BEFORE).status_code == 200
        proxy.hold()
        answers: list[httpx2.Response] = []
        restoring = threading.Thread(target=lambda: answers.append(hook(url, AFTER)))
        restoring.start()
        read_before = len(proxy.calls)
        wait_until(lambda: len(proxy.calls) > read_before)
        # The chain's re-read is held: the held chain does not make the gateway ready.
        for _ in range(3):
            healthz = httpx2.get(url + "/healthz")
            assert healthz.status_code == 503
            assert healthz.json()["type"] == "error"
        proxy.release()
        restoring.join(timeout=30)
        assert [answer.status_code for answer in answers] == [200]
        assert httpx2.get(url + "/healthz").status_code == 200


SEEDED_SERVE = (
    "import os, random, sys\n"
    "random.seed(27)\n"
    "from policy_gateway.cli.main import main\n"
    "sys.exit(main(['serve', '--port', os.environ['PORT']]))\n"
)


def test_environments_restored_from_one_snapshot_draw_different_ids(
    upstream: FakeUpstream, upstream_url: str, xray: XRayEndpoint, tmp_path: Any
) -> None:
    """Two processes in the same state play two environments restored from one snapshot.

    Tracing is on as in Lambda (spans to the X-Ray endpoint): a span id comes
    from `random`, so two processes seeded alike draw the same ids until their
    restore hooks re-seed them.
    """
    env = {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_LAMBDA_TASK_ROOT: str(tmp_path),
        tracing_settings.ENV_XRAY_DAEMON_ADDRESS: xray.address,
    }
    trace = "Root=1-67890abc-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1"
    command = [sys.executable, "-c", SEEDED_SERVE]

    def span_ids(urls: list[str]) -> list[str]:
        seen = len(xray.spans())
        for url in urls:
            client = anthropic.Anthropic(
                base_url=url,
                api_key="sk-ant-client",
                max_retries=0,
                default_headers={"x-amzn-trace-id": trace},
            )
            client.messages.create(model=MODEL, max_tokens=8, messages=[MESSAGE])
        return [span.span_id for span in xray.spans(expect=seen + len(urls))[seen:]]

    with (
        gateway_process(env, command=command) as (first, _),
        gateway_process(env, command=command) as (second, _),
    ):
        at_snapshot = span_ids([first, second])
        assert at_snapshot[0] == at_snapshot[1], "the two processes are not in the same state"
        for url in (first, second):
            assert hook(url, BEFORE).status_code == 200
            assert hook(url, AFTER).status_code == 200
        restored = span_ids([first, second])
    assert restored[0] != restored[1]
    assert not set(restored) & set(at_snapshot)


def test_spans_still_batched_are_exported_before_the_snapshot(
    upstream: FakeUpstream, upstream_url: str
) -> None:
    """OTLP's batch waits to fill; the process may be frozen for days with it unsent."""
    receiver = OTLPReceiver()
    with serving(receiver) as collector:
        env = {
            settings.ENV_UPSTREAM_BASE_URL: upstream_url,
            settings.ENV_UPSTREAM_MAX_RETRIES: "0",
            tracing_settings.ENV_OTLP_ENDPOINT: collector.url,
            # Far longer than the test: only a flush can send the call's spans.
            "OTEL_BSP_SCHEDULE_DELAY": "600000",
            **HOOKS_ON,
        }
        with gateway_process(env) as (url, _):
            client = anthropic.Anthropic(base_url=url, api_key="sk-ant-client", max_retries=0)
            client.messages.create(model=MODEL, max_tokens=8, messages=[MESSAGE])
            assert receiver.spans(seconds=0.5) == []
            assert hook(url, BEFORE).status_code == 200
            names = {span.name for span in receiver.spans(expect=2, seconds=0)}
    assert names == {"POST /v1/messages", "upstream policy attempt 1"}


def test_the_in_process_budget_starts_afresh_after_a_restore(
    make_gateway: Any, upstream: FakeUpstream, set_flag: Any
) -> None:
    """Counters held in the snapshot are shared by every environment restored from it."""
    set_flag("true")
    upstream.rules = reject_the_rewrite
    url = make_gateway(policy_config=REPLACE, fallback_budget=1, snapstart_hooks=True)

    def call() -> int:
        return httpx2.post(
            f"{url}/v1/messages", json=request_body(USER), headers=HEADERS
        ).status_code

    # The fallback once, then the budget refuses it: the client gets the upstream's 400.
    assert [call(), call()] == [200, 400]
    assert hook(url, BEFORE).status_code == 200
    assert hook(url, AFTER).status_code == 200
    assert call() == 200


@pytest.mark.parametrize("path", [BEFORE, AFTER])
def test_hook_paths_refuse_forwarded_invocations(
    make_gateway: Any, upstream: FakeUpstream, path: str
) -> None:
    url = make_gateway(snapstart_hooks=True)
    wait_until(lambda: httpx2.get(url + "/healthz").status_code == 200)
    # What the adapter forwards always carries its context headers; were one to
    # reach a hook path, it is refused and nothing happens.
    for header in ("x-amzn-lambda-context", "x-amzn-request-context"):
        answer = httpx2.post(url + path, headers={header: "{}"})
        assert answer.status_code == 403
        assert answer.json()["error"]["type"] == "permission_error"
    answer = httpx2.get(url + path)
    assert answer.status_code == 405
    assert answer.json()["type"] == "error"
    assert httpx2.get(url + "/healthz").status_code == 200


@pytest.mark.parametrize("path", [BEFORE, AFTER])
def test_hook_paths_do_not_exist_outside_lambda_by_default(
    make_gateway: Any, upstream: FakeUpstream, path: str
) -> None:
    url = make_gateway()
    answer = httpx2.post(url + path)
    assert answer.status_code == 404
    assert answer.json() == {
        "type": "error",
        "error": {"type": "not_found_error", "message": f"Not found: POST {path}"},
    }


def failed_hook(answer: httpx2.Response, name: str) -> None:
    """The adapter sees a non-2xx and fails the phase; the client-shaped body says which hook."""
    assert answer.status_code == 503
    assert answer.json() == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": f"The {name} hook failed; see the gateway's logs.",
        },
    }


def test_a_failed_restore_fails_the_hook_and_leaves_the_gateway_unready(
    make_gateway: Any, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from policy_gateway import snapstart

    url = make_gateway(snapstart_hooks=True)
    wait_until(lambda: httpx2.get(url + "/healthz").status_code == 200)

    def broken(config: settings.Settings) -> None:
        raise OSError("no file descriptors left")

    monkeypatch.setattr(snapstart, "UpstreamClient", broken)
    failed_hook(hook(url, AFTER), "after-restore")
    assert httpx2.get(url + "/healthz").status_code == 503


def test_a_failed_checkpoint_hook_fails_the_phase(
    make_gateway: Any, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-2xx before the checkpoint: Lambda takes no snapshot of a half-closed gateway."""
    url = make_gateway(snapstart_hooks=True)
    wait_until(lambda: httpx2.get(url + "/healthz").status_code == 200)

    def broken() -> None:
        raise OSError("the exporter's socket is gone")

    monkeypatch.setattr(tracing, "flush", broken)
    failed_hook(hook(url, BEFORE), "before-checkpoint")


def test_from_adapter_needs_loopback_and_no_forwarded_headers() -> None:
    from policy_gateway.lifecycle import from_adapter

    def scope(client: tuple[str, int] | None, *headers: bytes) -> dict[str, Any]:
        return {"client": client, "headers": [(name, b"{}") for name in headers]}

    assert from_adapter(scope(("127.0.0.1", 40000)))
    assert from_adapter(scope(("::1", 40000)))
    assert not from_adapter(scope(("203.0.113.9", 40000)))
    assert not from_adapter(scope(None))
    assert not from_adapter(scope(("not-an-address", 0)))
    assert not from_adapter(scope(("127.0.0.1", 40000), b"x-amzn-lambda-context"))
    assert not from_adapter(scope(("127.0.0.1", 40000), b"x-amzn-request-context"))


def test_a_restore_drops_the_metrics_the_snapshot_buffered(
    gateway_stdout: GatewayStdout,
) -> None:
    """Counted before the snapshot, unflushed: after a restore they are not this process's."""
    metrics.count(names.METRIC_REQUESTS)
    metrics.count_by(names.METRIC_POLICY_ACTIONS, {names.DIMENSION_POLICY: "from_the_snapshot"})
    metrics.discard()
    metrics.flush()
    assert gateway_stdout.text == ""
    metrics.count_by(names.METRIC_POLICY_ACTIONS, {names.DIMENSION_POLICY: "after_the_restore"})
    metrics.flush()
    assert "after_the_restore" in gateway_stdout.text
