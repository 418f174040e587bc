"""Run ASGI apps under a real uvicorn server on an ephemeral loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import uvicorn

from .printed import json_objects

ROOT = Path(__file__).resolve().parents[2]


async def lifespan_handled(scope: Any, receive: Any, send: Any) -> bool:
    """Answer uvicorn's lifespan protocol for a bare ASGI test app; True if this was it."""
    if scope["type"] != "lifespan":
        return False
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})
    return True


async def request_body(receive: Any) -> bytes:
    """The whole body of the request a bare ASGI test app is serving."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThreadedServer:
    """uvicorn serving `app` in a background thread until `stop()`."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=1,
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self) -> ThreadedServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@contextmanager
def serving(app: Any) -> Iterator[ThreadedServer]:
    server = ThreadedServer(app).start()
    try:
        yield server
    finally:
        server.stop()


def json_lines(text: str) -> list[dict[str, Any]]:
    """The lines of a process's output that are JSON objects (logs and EMF metrics)."""
    return [value for _, value in json_objects(text)]


def wait_ready(
    url: str, process: subprocess.Popen[bytes] | None = None, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"gateway process exited with {process.returncode}")
        try:
            if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} not ready after {timeout}s")


@contextmanager
def gateway_process(
    env: Mapping[str, str],
    command: list[str] | None = None,
    cwd: Path | None = None,
    stdout_path: Path | None = None,
    serve_args: Sequence[str] = (),
    ready: bool = True,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`policy-gateway serve` (or `command`) as a real child process; yields its URL.

    With `ready`, once /healthz answers 200; without, at once, for a test of
    what comes before. The child's stdout (JSON logs and EMF lines) goes to
    `stdout_path` when given, so a test can parse what the gateway printed.
    """
    port = free_port()
    full_env = {**os.environ, **env, "PORT": str(port)}
    args = command or [
        sys.executable, "-m", "policy_gateway", "serve", "--port", str(port), *serve_args,
    ]  # fmt: skip
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(args, env=full_env, cwd=cwd or ROOT, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        if ready:
            wait_ready(url, process)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if stdout_path:
            out.close()  # type: ignore[union-attr]
