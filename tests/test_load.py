"""Load: many concurrent streams through one gateway process, and a long soak with flat memory.

The gateway and the fake upstream run as child processes, so the client load in this
process does not share their GIL. Counts and time are bounded for a 2-core CI machine.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import psutil
import pytest

from .support.client import HEADERS, request_body, sse_frames
from .support.servers import gateway_process

pytestmark = pytest.mark.load

CLIENTS = 200
SOAK_REQUESTS = 10_000
SOAK_WARM_UP = 500
RSS_GROWTH_LIMIT = 30 * 1024 * 1024

_FAKE_UPSTREAM = (
    "import os, uvicorn\n"
    "from tests.support.fake_upstream import FakeUpstream\n"
    "uvicorn.run(FakeUpstream(), host='127.0.0.1', port=int(os.environ['PORT']),"
    " log_level='warning', backlog=1024)\n"
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, Path]]:
    """(URL, pid, log path) of a gateway process in front of a fake upstream process."""
    logs = tmp_path_factory.mktemp("load")
    with (
        gateway_process({}, command=[sys.executable, "-c", _FAKE_UPSTREAM]) as (upstream, _),
        gateway_process(
            {"UPSTREAM_BASE_URL": upstream, "UPSTREAM_MAX_RETRIES": "0"},
            stdout_path=logs / "gateway.log",
        ) as (url, process),
    ):
        yield url, process.pid, logs / "gateway.log"


def echoed(text: str) -> str:
    """What the fake upstream streams back for `text`: its words, as one delta each."""
    return "".join(f"echo: {text}".split(" "))


def stream_text(payload: str) -> str:
    frames = sse_frames(payload)
    assert frames[-1][0] == "message_stop", frames[-1]
    return "".join(
        json.loads(data)["delta"]["text"] for name, data in frames if name == "content_block_delta"
    )


def test_concurrent_streams_have_no_errors_and_no_cross_talk(
    gateway: tuple[str, int, Path],
) -> None:
    url, _, _ = gateway
    results: dict[int, str] = {}
    expected = {n: f"client {n} token {uuid.uuid4().hex}" for n in range(CLIENTS)}

    async def run() -> None:
        everyone_streaming = anyio.Event()
        first_events = 0
        limits = httpx2.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
        async with httpx2.AsyncClient(limits=limits, timeout=60) as client:

            async def one(n: int) -> None:
                nonlocal first_events
                body = request_body(expected[n], stream=True)
                async with client.stream(
                    "POST", f"{url}/v1/messages", json=body, headers=HEADERS
                ) as response:
                    assert response.status_code == 200
                    chunks = response.aiter_text()
                    received = await chunks.__anext__()
                    # Hold every stream open until all of them have started.
                    first_events += 1
                    if first_events == CLIENTS:
                        everyone_streaming.set()
                    await everyone_streaming.wait()
                    async for chunk in chunks:
                        received += chunk
                results[n] = received

            with anyio.fail_after(90):
                async with anyio.create_task_group() as group:
                    for n in range(CLIENTS):
                        group.start_soon(one, n)

    anyio.run(run)
    assert len(results) == CLIENTS
    for n, payload in results.items():
        assert stream_text(payload) == echoed(expected[n])


def test_soak_keeps_memory_flat(gateway: tuple[str, int, Path]) -> None:
    url, pid, _ = gateway
    process = psutil.Process(pid)
    started = time.monotonic()
    with httpx2.Client(base_url=url, headers=HEADERS, timeout=30) as client:

        def call(n: int) -> None:
            stream = n % 5 == 0
            text = f"soak {n}"
            response = client.post("/v1/messages", json=request_body(text, stream=stream))
            assert response.status_code == 200, response.text
            if stream:
                assert stream_text(response.text) == echoed(text)
            else:
                assert response.json()["content"][0]["text"] == f"echo: {text}"

        for n in range(SOAK_WARM_UP):
            call(n)
        baseline = process.memory_info().rss
        for n in range(SOAK_WARM_UP, SOAK_REQUESTS):
            call(n)
        growth = process.memory_info().rss - baseline
    elapsed = time.monotonic() - started
    print(f"soak: {SOAK_REQUESTS} requests in {elapsed:.1f}s, RSS growth {growth / 2**20:.1f} MiB")
    assert growth < RSS_GROWTH_LIMIT
