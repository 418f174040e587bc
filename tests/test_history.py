"""`policy-gateway history`: list, show and delete in a terminal, and the read-only page,
in a real browser (headless Chromium over the DevTools protocol), against records the
real gateway wrote (tests/support/records.py: a redaction, a blocked tool call, a branch).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import httpx2
import pytest
from policy_gateway.cli.history_page import viewer_app
from policy_gateway.cli.operator_errors import OperatorError
from policy_gateway.records.store import FolderStore
from websockets.sync.client import ClientConnection, connect

from .conftest import PutSecret
from .support.cli import cli
from .support.fake_upstream import FakeUpstream
from .support.gateway import GatewayFactory, GatewayStdout
from .support.records import SECRET, converse, start_gateway
from .support.servers import ThreadedServer, free_port

DOCS_IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"
BROWSER = "chromium"
# The flags of the brief: headless, no sandbox (root in CI), nothing fetched from Google.
BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


@pytest.fixture
def records(
    make_gateway: GatewayFactory,
    put_secret: PutSecret,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    tmp_path: Path,
) -> Path:
    """A folder of records the real gateway wrote: Alice's conversation, not Bob's call."""
    folder = tmp_path / "records"
    url = start_gateway(make_gateway, put_secret, records_dir=str(folder))
    converse(url, upstream, gateway_stdout)
    return folder


def test_list_show_and_delete_in_the_terminal(records: Path) -> None:
    listed = cli("history", "list", "--dir", str(records))
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    conversation = line.split()[0]
    assert "alice" in line
    assert "4 calls  1 branches  blocked,redacted" in line
    assert cli("history", "list", "--dir", str(records), "--caller", "bob").stdout.startswith(
        "no recorded conversation"
    )
    assert "alice" in cli("history", "list", "--dir", str(records), "--with", "blocked").stdout
    assert (
        "no recorded" in cli("history", "list", "--dir", str(records), "--with", "fallback").stdout
    )
    assert (
        "no recorded"
        in cli("history", "list", "--dir", str(records), "--since", "2099-01-01").stdout
    )

    shown = cli("history", "show", conversation[:8], "--dir", str(records))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert SECRET not in text
    assert "user: deploy with [REDACTED:aws_access_key_id] please" in text
    assert ">> policy: 1 secret redacted here: aws_access_key_id" in text
    assert ">> policy: this call blocked by block_tool_calls: bash" in text
    assert "-- note: branch: 1 other version(s) of this turn" in text
    # Turn by turn: the redaction before the answer, the block after it.
    assert text.index("redacted here") < text.index("assistant: Sure.") < text.index("blocked by")
    missing = cli("history", "show", "nope-nope", "--dir", str(records))
    assert missing.returncode == 1
    assert "history list" in missing.stderr

    kept = cli(
        "history", "delete", "--caller", "alice", "--before", "2000-01-01", "--dir", str(records)
    )
    assert "deleted 0 objects" in kept.stdout
    deleted = cli("history", "delete", "--caller", "alice", "--dir", str(records))
    assert deleted.returncode == 0, deleted.stderr
    assert "deleted 6 objects of caller alice" in deleted.stdout  # 4 calls, 2 blobs
    assert "no recorded" in cli("history", "list", "--dir", str(records)).stdout


def test_without_a_store_history_says_what_to_set(tmp_path: Path) -> None:
    result = cli("history", "list", unset=("RECORDS_BUCKET", "RECORDS_DIR"))
    assert result.returncode == 2
    assert "RECORDS_BUCKET" in result.stderr


@pytest.fixture
def page(records: Path) -> Iterator[str]:
    port = free_port()
    server = ThreadedServer(viewer_app(FolderStore(records), "127.0.0.1", port), port).start()
    yield server.url
    server.stop()


def test_the_page_answers_its_own_host_and_pages_only(page: str) -> None:
    assert httpx2.get(page).status_code == 200
    assert httpx2.get(page, headers={"sec-fetch-site": "same-origin"}).status_code == 200
    refused = [
        {"host": "evil.example"},
        {"origin": "http://evil.example"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
    ]
    for headers in refused:
        assert httpx2.get(page, headers=headers).status_code == 403, headers
    assert httpx2.post(page).status_code == 405
    answer = httpx2.get(page)
    assert "script-src" not in answer.headers["content-security-policy"]
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    with pytest.raises(OperatorError, match="loopback only"):
        viewer_app(FolderStore("."), "0.0.0.0", 8089)


NAVIGATED = "Inspected target navigated or closed"


class DevTools:
    """One page target of a headless Chromium, driven over its DevTools websocket."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.ids = count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            reply = json.loads(self.socket.recv(timeout=60))
            if reply.get("id") == number:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def act(self, expression: str) -> None:
        """Evaluate what a person does (a click, a submit): when it navigates, Chromium may
        answer that the page it ran in went away, which is the act's success."""
        try:
            self.evaluate(expression)
        except RuntimeError as error:
            if NAVIGATED not in str(error):
                raise

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError as error:  # asked while the page was being replaced
                if NAVIGATED not in str(error):
                    raise
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"never true in the page: {expression}")

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))


@pytest.fixture
def browser() -> Iterator[DevTools]:
    found = shutil.which(BROWSER)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{BROWSER} is not installed (apt-get install chromium): CI must run this")
        pytest.skip(f"{BROWSER} is not installed (make test installs it with apt-get)")
    port = free_port()
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    process = subprocess.Popen(
        [
            found,
            *BROWSER_FLAGS,
            f"--user-data-dir={profile}",
            f"--remote-debugging-port={port}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with connect(_page_socket(port), max_size=None) as socket:
            yield DevTools(socket)
    finally:
        process.terminate()
        process.wait(timeout=20)
        shutil.rmtree(profile, ignore_errors=True)


def _page_socket(port: int) -> str:
    """The DevTools websocket of the browser's first page, once it answers."""
    deadline = time.monotonic() + 60
    while True:
        try:
            targets = httpx2.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        except httpx2.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("chromium's DevTools endpoint never answered")
        time.sleep(0.2)


def test_a_person_finds_the_blocked_and_redacted_conversation_in_a_browser(
    page: str, browser: DevTools
) -> None:
    tools = browser
    tools.send("Page.enable")
    tools.send("Page.navigate", url=f"{page}/")
    tools.wait_for("document.readyState === 'complete' && !!document.querySelector('table')")
    tools.screenshot(DOCS_IMAGES / "history-list.png")
    listed = tools.evaluate("document.body.innerText")
    assert "1 conversation(s)" in listed
    assert SECRET not in listed
    # What a person does: tick "blocked" and "redacted", filter, open the conversation.
    tools.act(
        "for (const box of document.querySelectorAll('input[name=with]'))"
        " box.checked = box.value !== 'fallback'; document.querySelector('form').submit()"
    )
    tools.wait_for("location.search.includes('with=blocked') && document.readyState === 'complete'")
    tools.act(
        "[...document.querySelectorAll('tr.conversation')].find(row =>"
        " row.innerText.includes('blocked') && row.innerText.includes('redacted'))"
        ".querySelector('a').click()"
    )
    tools.wait_for(
        "location.pathname.startsWith('/c/') && !!document.querySelector('section.call')"
    )
    seen = tools.evaluate("document.body.innerText")
    assert SECRET not in seen
    assert "[REDACTED:aws_access_key_id]" in seen
    assert "1 secret redacted here: aws_access_key_id" in seen
    assert "this call blocked by block_tool_calls: bash" in seen
    assert "branch: 1 other version(s) of this turn" in seen
    assert tools.evaluate("document.querySelectorAll('section.call').length") == 3
    policy_color = tools.evaluate(
        "getComputedStyle(document.querySelector('.entry.policy')).borderLeftColor"
    )
    assert policy_color == "rgb(224, 138, 0)"  # the actions stand out where they happened
    tools.screenshot(DOCS_IMAGES / "history-conversation.png")
    # The other branch, by its link; then the live view, which reloads by itself.
    tools.act("document.querySelector('.entry.note a').click()")
    tools.wait_for("location.search.includes('call=') && document.readyState === 'complete'")
    assert "Trying." in tools.evaluate("document.body.innerText")
    tools.act("[...document.querySelectorAll('a')].find(a => a.innerText === 'live view').click()")
    # The live view reloads itself: asked between two of its loads, the page answers.
    tools.wait_for(
        "location.search.includes('live=1') && !!document.querySelector('meta[http-equiv=refresh]')"
    )
