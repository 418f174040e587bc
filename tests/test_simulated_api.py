"""The upstream simulator's Models and Message Batches, driven by the official SDK through the
real gateway: the API's shapes and pagination, a batch's status moving on the simulator's clock,
results answered as /v1/messages answers, and every 404 saying it is the simulator's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from policy_gateway import settings
from policy_gateway.local.simulated_batches import CANCELING_SECONDS, PROCESSING_SECONDS
from policy_gateway.local.simulated_errors import KNOWN_MODELS, SIMULATOR
from policy_gateway.local.simulated_models import CATALOGUE
from policy_gateway.local.simulator import create_simulator

from .support.clock import ManualClock
from .support.gateway import GatewayFactory
from .support.sdk import sdk
from .support.servers import ROOT, ThreadedServer, gateway_process, serving

MODEL = "claude-sonnet-4-6"
SECRET = "AKIAIOSFODNN7EXAMPLE"
DOCUMENTED_URL = "http://127.0.0.1:8080"
REDACT = json.dumps({"policies": [{"policy": "redact_secrets", "options": {}}]})


def entry(custom_id: str, text: str, model: str = MODEL) -> Any:
    return {
        "custom_id": custom_id,
        "params": {
            "model": model,
            "max_tokens": 32,
            "messages": [{"role": "user", "content": text}],
        },
    }


@pytest.fixture
def sim_clock() -> ManualClock:
    return ManualClock(start=1_767_225_600.0)  # 2026-01-01T00:00:00Z


@pytest.fixture
def simulator(sim_clock: ManualClock) -> Iterator[ThreadedServer]:
    with serving(create_simulator(clock=sim_clock)) as server:
        yield server


@pytest.fixture
def gateway(make_gateway: GatewayFactory, simulator: ThreadedServer) -> anthropic.Anthropic:
    return sdk(make_gateway(upstream_base_url=simulator.url, policy_config=REDACT))


def test_models_list_pages_as_the_api_does(gateway: anthropic.Anthropic) -> None:
    every = [model.id for model in gateway.models.list()]
    assert every == [model["id"] for model in CATALOGUE]
    assert all(KNOWN_MODELS.match(model_id) for model_id in every)
    first = gateway.models.list(limit=2)
    assert [model.id for model in first.data] == every[:2]
    assert (first.has_more, first.first_id, first.last_id) == (True, every[0], every[1])
    # The SDK's auto-pagination follows after_id page by page to the end.
    assert [model.id for model in gateway.models.list(limit=2)] == every
    after = gateway.models.list(limit=2, after_id=every[1])
    assert [model.id for model in after.data] == every[2:4]
    before = gateway.models.list(limit=2, before_id=every[3])
    assert [model.id for model in before.data] == every[1:3]
    assert before.has_more is True
    assert gateway.models.list(before_id=every[1]).has_more is False
    with pytest.raises(anthropic.BadRequestError, match="limit"):
        gateway.models.list(limit=0)


def test_a_model_is_retrieved_and_an_unknown_one_is_the_simulator_s_404(
    gateway: anthropic.Anthropic,
) -> None:
    model = gateway.models.retrieve(MODEL)
    assert (model.id, model.type, model.lifecycle) == (MODEL, "model", "active")
    with pytest.raises(anthropic.NotFoundError) as raised:
        gateway.models.retrieve("claude-instant-1.2")
    assert SIMULATOR in raised.value.message


def test_a_batch_ends_on_the_clock_and_its_results_are_the_messages_replies(
    gateway: anthropic.Anthropic, sim_clock: ManualClock
) -> None:
    batches = gateway.messages.batches
    batch = batches.create(
        requests=[
            entry("hello", "hello there"),
            entry("leaky", f"my key is {SECRET}"),
            entry("retired", "hi", model="claude-instant-1.2"),
        ]
    )
    assert batch.processing_status == "in_progress"
    assert batch.request_counts.processing == 3
    assert batch.results_url is None
    sim_clock.advance(PROCESSING_SECONDS - 0.1)
    assert batches.retrieve(batch.id).processing_status == "in_progress"
    sim_clock.advance(0.1)
    ended = batches.retrieve(batch.id)
    assert ended.processing_status == "ended"
    assert ended.ended_at is not None
    counts = ended.request_counts
    assert (counts.processing, counts.succeeded, counts.errored) == (0, 2, 1)
    # The gateway pointed the link at its own route (a path the SDK resolves on its base).
    assert ended.results_url == f"/v1/messages/batches/{batch.id}/results"
    results = {line.custom_id: line.result for line in batches.results(batch.id)}
    hello = results["hello"]
    assert hello.type == "succeeded"
    assert "hello there" in hello.message.content[0].text  # type: ignore[union-attr]
    leaky = results["leaky"]
    assert leaky.type == "succeeded"
    # The request chain ran on the entry: the simulator echoes what it received.
    echoed = leaky.message.content[0].text  # type: ignore[union-attr]
    assert SECRET not in echoed
    assert "[REDACTED:aws_access_key_id]" in echoed
    retired = results["retired"]
    assert retired.type == "errored"
    assert retired.error.error.type == "not_found_error"
    assert SIMULATOR in retired.error.error.message


def test_a_canceled_batch_is_canceling_then_ended_with_every_entry_canceled(
    gateway: anthropic.Anthropic, sim_clock: ManualClock
) -> None:
    batches = gateway.messages.batches
    batch = batches.create(requests=[entry("one", "1"), entry("two", "2")])
    canceling = batches.cancel(batch.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None
    with pytest.raises(anthropic.BadRequestError, match="cancel it first"):
        batches.delete(batch.id)
    sim_clock.advance(CANCELING_SECONDS)
    ended = batches.retrieve(batch.id)
    assert ended.processing_status == "ended"
    assert (ended.request_counts.canceled, ended.request_counts.succeeded) == (2, 0)
    assert {line.result.type for line in batches.results(batch.id)} == {"canceled"}
    assert batches.delete(batch.id).type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError, match="simulator"):
        batches.retrieve(batch.id)


def test_batches_list_newest_first_with_pagination(gateway: anthropic.Anthropic) -> None:
    batches = gateway.messages.batches
    made = [batches.create(requests=[entry(f"n{index}", "hi")]).id for index in range(3)]
    newest_first = made[::-1]
    assert [batch.id for batch in batches.list()] == newest_first
    first = batches.list(limit=2)
    assert [batch.id for batch in first.data] == newest_first[:2]
    assert (first.has_more, first.last_id) == (True, newest_first[1])
    assert [batch.id for batch in batches.list(limit=1)] == newest_first


def test_a_batch_the_api_would_refuse_is_a_400(gateway: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="unique"):
        gateway.messages.batches.create(requests=[entry("same", "a"), entry("same", "b")])


def test_results_before_the_end_are_refused(simulator: ThreadedServer) -> None:
    batch = sdk(simulator.url).messages.batches.create(requests=[entry("a", "a")])
    answer = httpx2.get(f"{simulator.url}/v1/messages/batches/{batch.id}/results")
    assert answer.status_code == 400
    assert "in_progress" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/files", 404),
        ("GET", "/v1/messages/batches/msgbatch_nope", 404),
        ("POST", "/v1/models", 405),
    ],
)
def test_what_the_simulator_does_not_serve_says_so_in_the_api_s_shape(
    simulator: ThreadedServer, method: str, path: str, status: int
) -> None:
    answer = httpx2.request(method, f"{simulator.url}{path}")
    assert answer.status_code == status
    body = answer.json()
    assert body["type"] == "error"
    assert SIMULATOR in body["error"]["message"]


def test_an_unserved_route_through_the_gateway_names_the_simulator(
    make_gateway: GatewayFactory, simulator: ThreadedServer
) -> None:
    url = make_gateway(upstream_base_url=simulator.url, allow_files_api=True)
    with pytest.raises(anthropic.NotFoundError, match=SIMULATOR):
        sdk(url).beta.files.list()


def documented_block(containing: str) -> str:
    """docs/reference.md's ```python block that contains `containing`."""
    text = (ROOT / "docs" / "reference.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    found = [block for block in blocks if containing in block]
    assert len(found) == 1, f"{len(found)} python blocks in docs/reference.md hold {containing!r}"
    return str(found[0])


def test_the_documented_batch_example_runs_against_serve_s_simulator(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As written, against `policy-gateway serve --simulate-upstream` (what `make run` starts)."""
    monkeypatch.delenv(settings.ENV_UPSTREAM_BASE_URL, raising=False)
    example = documented_block("client.messages.batches.create")
    with gateway_process(
        {}, stdout_path=tmp_path / "serve.log", serve_args=["--simulate-upstream"]
    ) as (
        url,
        _,
    ):
        ran = subprocess.run(
            [sys.executable, "-c", example.replace(DOCUMENTED_URL, url)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert ran.returncode == 0, ran.stderr
    models, result = ran.stdout.splitlines()
    assert MODEL in models
    assert result == "greeting succeeded"
