"""`sam build` produces the artifact `sam deploy` uploads, and that artifact works.

The build runs once per session, without a container (it needs a python3.13 on
PATH; pyenv provides one with PYENV_VERSION=3.11.7:3.13.0). The serving test then
starts the *built* function through its own run.sh, as the Web Adapter would,
with the built layer on PYTHONPATH where Lambda mounts it (/opt/python), under
Python 3.13 like the python3.13 runtime, and streams a reply through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from policy_gateway import settings

from .support.fake_upstream import FakeUpstream, Reply, text_events
from .support.servers import ThreadedServer, free_port, gateway_process

pytestmark = pytest.mark.sam_build

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
SAM = Path(sys.executable).parent / "sam"
FUNCTION = "GatewayFunction"
LAYER = "PoliciesLayer"
PYENV_FALLBACK = "3.11.7:3.13.0"
# Lambda's unzipped limit is 250 MB for the function and all its layers; the
# adapter layer takes a few MB of it.
UNZIPPED_BUDGET = 200 * 1024 * 1024


@dataclass(frozen=True)
class Python313:
    executable: Path
    env: dict[str, str]  # what to add to the environment for python3.13 to resolve


def _find_python313() -> Python313:
    """A python3.13 as `sam build` will find it: on PATH, or through pyenv."""
    for extra in ({}, {"PYENV_VERSION": PYENV_FALLBACK}):
        env = {**_clean_env(), **extra}
        try:
            found = subprocess.run(
                ["python3.13", "-c", "import sys; print(sys.executable)"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except FileNotFoundError:
            break
        if found.returncode == 0:
            return Python313(Path(found.stdout.strip()), extra)
    pytest.fail(
        "sam build (no container) needs a python3.13 on PATH; with pyenv: "
        f"pyenv install 3.13 and PYENV_VERSION={PYENV_FALLBACK}"
    )


def _clean_env() -> dict[str, str]:
    # The test run's own PYTHONPATH (3.11 packages) must not leak into the
    # python3.13 that sam build and the served function use.
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="session")
def python313() -> Python313:
    return _find_python313()


@pytest.fixture(scope="session")
def sam_build_dir(tmp_path_factory: pytest.TempPathFactory, python313: Python313) -> Path:
    """Run `sam build` once per session; return its build dir (`.aws-sam/build` layout)."""
    assert SAM.exists(), f"sam not found next to {sys.executable}; install the dev extras"
    build_dir = tmp_path_factory.mktemp("sam") / "build"
    env = {**_clean_env(), **python313.env, "SAM_CLI_TELEMETRY": "0"}
    result = subprocess.run(
        [
            str(SAM),
            "build",
            "--template-file",
            str(TEMPLATE),
            "--build-dir",
            str(build_dir),
            "--no-cached",
            "--no-use-container",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,  # inside pytest-timeout's 300 s per test (setup included)
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return build_dir


def _tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_built_function_has_the_entry_point_and_the_package(sam_build_dir: Path) -> None:
    function = sam_build_dir / FUNCTION
    run_sh = function / "run.sh"
    assert run_sh.is_file()
    assert os.access(run_sh, os.X_OK), "run.sh lost its execute bit in the build"
    assert (function / "policy_gateway" / "__init__.py").is_file()
    assert (function / "policy_gateway" / "__main__.py").is_file()
    for dependency in ("starlette", "uvicorn", "httpx2", "aws_lambda_powertools"):
        assert (function / dependency).is_dir(), f"{dependency} missing from the function"
    # The policies ship only in the layer, so a policy change is a layer change.
    assert not (function / "gateway_policies").exists()


def test_built_layer_has_the_policies_under_python(sam_build_dir: Path) -> None:
    python = sam_build_dir / LAYER / "python"
    assert (python / "gateway_policies" / "__init__.py").is_file()
    assert (python / "gateway_policies" / "builtin").is_dir()
    assert (python / "pydantic").is_dir()


def test_built_template_points_at_the_artifacts(sam_build_dir: Path) -> None:
    built = (sam_build_dir / "template.yaml").read_text()
    assert f"CodeUri: {FUNCTION}" in built
    assert f"ContentUri: {LAYER}" in built


def test_artifact_fits_lambdas_unzipped_limit(sam_build_dir: Path) -> None:
    size = _tree_size(sam_build_dir / FUNCTION) + _tree_size(sam_build_dir / LAYER)
    assert size < UNZIPPED_BUDGET, f"function + layer unzipped: {size / 2**20:.0f} MB"


# ------------------------------------------------- serve the built artifact


@pytest.fixture
def fake_upstream() -> Iterator[tuple[FakeUpstream, str]]:
    upstream = FakeUpstream()
    server = ThreadedServer(upstream).start()
    try:
        yield upstream, server.url
    finally:
        server.stop()


@pytest.fixture
def local_ssm() -> Iterator[str]:
    """A moto SSM on loopback holding the flag (off), as the stack creates it."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        boto3.client(
            "ssm",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        ).put_parameter(
            Name="/policy-gateway/passthrough-fallback-enabled",
            Value="false",
            Type="String",
            Overwrite=True,
        )
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def lambda_like_python(tmp_path: Path, python313: Python313) -> Path:
    """A PATH entry whose `python3` is Python 3.13, as in the Lambda runtime."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python313.executable)
    return bin_dir


def _sse_events(response: httpx2.Response) -> list[tuple[float, str, dict[str, Any]]]:
    """(arrival time, event name, data) for each SSE frame, as it arrives."""
    events: list[tuple[float, str, dict[str, Any]]] = []
    name = ""
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            events.append((time.monotonic(), name, json.loads(line.removeprefix("data:"))))
    return events


def test_built_artifact_streams_through_run_sh(
    sam_build_dir: Path,
    fake_upstream: tuple[FakeUpstream, str],
    local_ssm: str,
    lambda_like_python: Path,
    tmp_path: Path,
) -> None:
    upstream, upstream_url = fake_upstream
    bin_dir = lambda_like_python
    function = sam_build_dir / FUNCTION
    layer_python = sam_build_dir / LAYER / "python"
    parts = ["one ", "two ", "three ", "four ", "five"]
    upstream.script(Reply(events=text_events(parts), event_delay=0.15))
    # A policy from the built layer rewrites the request, so the served artifact
    # proves the layer's code and its compiled dependencies (pydantic) load.
    chain = {
        "policies": [
            {"policy": "string_replace", "options": {"replacements": [["haiku", "limerick"]]}}
        ]
    }
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        # run.sh adds the task root and /opt/python; here the layer is not at /opt.
        "PYTHONPATH": str(layer_python),
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
        "UPSTREAM_BASE_URL": upstream_url,
        "POLICY_CONFIG": json.dumps(chain),
        "AUTH_MODE": "passthrough",
        "AWS_ENDPOINT_URL_SSM": local_ssm,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    body = json.loads((ROOT / "events" / "bodies" / "streaming.json").read_text())
    log = tmp_path / "gateway.log"
    with (
        gateway_process(env, command=[str(function / "run.sh")], cwd=function, stdout_path=log) as (
            url,
            _process,
        ),
        httpx2.stream(
            "POST",
            f"{url}/v1/messages",
            json=body,
            headers={
                "x-api-key": "sk-ant-test",
                "anthropic-version": "2023-06-01",
                "accept": "text/event-stream",
            },
            timeout=30,
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _sse_events(response)

    names = [name for _, name, _ in events]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    text = "".join(
        data["delta"]["text"] for _, name, data in events if name == "content_block_delta"
    )
    assert text == "".join(parts)
    # Relayed frame by frame, not buffered: the frames arrive spread out over the
    # time the upstream took to send them.
    assert events[-1][0] - events[0][0] >= 0.5
    (sent,) = upstream.requests
    assert "limerick" in sent.json["messages"][0]["content"]
    assert sent.headers["x-api-key"] == "sk-ant-test"
    # The built artifact printed the same metric identity a deployed one would.
    emf = [json.loads(line) for line in log.read_text().splitlines() if line.startswith('{"_aws"')]
    assert emf, log.read_text()
    directive = emf[-1]["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == settings.METRICS_NAMESPACE
    assert directive["Dimensions"] == [["service"]]
    assert emf[-1]["service"] == settings.SERVICE_NAME


def test_run_sh_puts_the_layers_on_the_python_path() -> None:
    """Lambda sets no PYTHONPATH for Python runtimes: its own bootstrap adds the task
    root and /opt/python (where layers are mounted) to sys.path. Under the Web
    Adapter that bootstrap never runs, so run.sh must add them, or the policies
    layer cannot be imported in Lambda (the serving test above sets PYTHONPATH
    itself and cannot see this)."""
    run_sh = (ROOT / "functions" / "gateway" / "run.sh").read_text()
    assert "PYTHONPATH" in run_sh
    assert "/opt/python" in run_sh
