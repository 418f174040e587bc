"""`sam build` produces the artifact `sam deploy` uploads, and that artifact works.

The build (release/sam_build.py, the command line the bench runs too) runs once
per session for each architecture (both at once), without a container (it needs
a python3.13 on PATH; pyenv provides one with PYENV_VERSION=3.11.7:3.13.0). Each
artifact must hold exactly the locked versions, compiled for its architecture,
with its SBOM. The serving test then starts the *built* x86_64 function (this
machine's) through its own run.sh, as the Web Adapter would, with the built
layer on PYTHONPATH where Lambda mounts it (/opt/python), under Python 3.13
like the python3.13 runtime, and streams a reply through it.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from policy_gateway import names

from release import sam_build
from release.sam_build import ARCHITECTURES, FUNCTION, LAYER

from .support.fake_upstream import FakeUpstream, Reply, text_events
from .support.servers import ThreadedServer, free_port, gateway_process
from .support.traces import XRayEndpoint

pytestmark = [pytest.mark.deploy, pytest.mark.sam_build]

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "locks"
# e_machine in the ELF header of a compiled extension module.
ELF_MACHINE = {"arm64": 0xB7, "x86_64": 0x3E}
# Lambda's unzipped limit is 250 MB for the function and all its layers; the
# adapter layer takes a few MB of it.
UNZIPPED_BUDGET = 200 * 1024 * 1024


@pytest.fixture(scope="session")
def python313() -> sam_build.Python313:
    try:
        return sam_build.find_python313()
    except sam_build.MissingPython313 as missing:
        pytest.fail(str(missing))


@pytest.fixture(scope="session")
def sam_builds(
    tmp_path_factory: pytest.TempPathFactory, python313: sam_build.Python313
) -> dict[str, Path]:
    """Run `sam build` once per session per architecture, both at once; return each
    build dir (`.aws-sam/build` layout)."""
    root = tmp_path_factory.mktemp("sam")
    builds = {arch: root / arch for arch in ARCHITECTURES}
    running = {
        arch: sam_build.start(build_dir, arch, python313, subprocess.PIPE)
        for arch, build_dir in builds.items()
    }
    for arch, process in running.items():
        # inside pytest-timeout's 300 s per test (setup included)
        output, _ = process.communicate(timeout=280)
        assert process.returncode == 0, f"sam build ({arch}):\n{output}"
    return builds


@pytest.fixture(scope="session")
def sam_build_dir(sam_builds: dict[str, Path]) -> Path:
    """The build this machine can run (x86_64)."""
    return sam_builds["x86_64"]


def _tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_built_function_has_the_entry_point_and_the_package(sam_build_dir: Path) -> None:
    function = sam_build_dir / FUNCTION
    run_sh = function / "run.sh"
    assert run_sh.is_file()
    assert os.access(run_sh, os.X_OK), "run.sh lost its execute bit in the build"
    assert (function / "policy_gateway" / "__init__.py").is_file()
    assert (function / "policy_gateway" / "__main__.py").is_file()
    for dependency in ("starlette", "uvicorn", "httpx2", "aws_lambda_powertools", "opentelemetry"):
        assert (function / dependency).is_dir(), f"{dependency} missing from the function"
    # Tracing in Lambda goes to X-Ray over UDP: neither the X-Ray SDK nor the
    # OTLP/HTTP exporter (and its HTTP client) is shipped.
    assert not (function / "aws_xray_sdk").exists()
    assert not (function / "opentelemetry" / "exporter" / "otlp" / "proto" / "http").exists()
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


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked(lock: Path) -> dict[str, str]:
    """name -> version of every pin in a lock file."""
    pins = re.findall(r"^([A-Za-z0-9][\w.-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", lock.read_text(), re.M)
    return {_normalize(name): version for name, version in pins}


def _installed(target: Path) -> dict[str, str]:
    """name -> version of every distribution pip installed into a --target dir."""
    found = {}
    for metadata in target.glob("*.dist-info/METADATA"):
        fields = dict(
            line.split(": ", 1) for line in metadata.read_text().splitlines() if ": " in line
        )
        found[_normalize(fields["Name"])] = fields["Version"]
    return found


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_built_artifacts_hold_exactly_the_locked_versions(
    sam_builds: dict[str, Path], arch: str
) -> None:
    build = sam_builds[arch]
    function = _installed(build / FUNCTION)
    layer = _installed(build / LAYER / "python")
    assert function == _locked(LOCKS / f"function-{arch}.txt")
    assert layer == _locked(LOCKS / f"layer-{arch}.txt")
    # A package in both (anyio, ...) has one version: the function's copy is first
    # on sys.path, and the layer was locked against it.
    assert all(function[name] == version for name, version in layer.items() if name in function)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_compiled_extensions_are_for_the_built_architecture(
    sam_builds: dict[str, Path], arch: str
) -> None:
    build = sam_builds[arch]
    extensions = [*build.joinpath(FUNCTION).rglob("*.so"), *build.joinpath(LAYER).rglob("*.so")]
    # uvloop, httptools, wrapt in the function; pydantic_core, jiter in the layer.
    assert len(extensions) >= 5
    for extension in extensions:
        header = extension.read_bytes()[:20]
        assert header[:4] == b"\x7fELF", extension
        assert int.from_bytes(header[18:20], "little") == ELF_MACHINE[arch], extension
        assert "cpython-313" in extension.name or "abi3" in extension.name, extension
    assert (build / FUNCTION / "ARCHITECTURE").read_text().strip() == arch


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_each_artifact_carries_its_sbom(sam_builds: dict[str, Path], arch: str) -> None:
    for sbom_path, lock in (
        (sam_builds[arch] / FUNCTION / "sbom.cdx.json", f"function-{arch}.txt"),
        (sam_builds[arch] / LAYER / "policies-layer.sbom.cdx.json", f"layer-{arch}.txt"),
    ):
        sbom = json.loads(sbom_path.read_text())
        assert sbom["bomFormat"] == "CycloneDX"
        assert sbom["metadata"]["component"]["name"] == "policy-gateway"
        listed = {_normalize(c["name"]): c["version"] for c in sbom["components"]}
        assert listed == _locked(LOCKS / lock)
        # Each component names the sha256 digests the lock allowed pip to install.
        for component in sbom["components"]:
            (distribution,) = component["externalReferences"]
            assert distribution["type"] == "distribution"
            assert {h["alg"] for h in distribution["hashes"]} == {"SHA-256"}, component["name"]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="needs a host that is not arm64")
def test_run_sh_refuses_an_artifact_built_for_another_architecture(
    sam_builds: dict[str, Path],
) -> None:
    function = sam_builds["arm64"] / FUNCTION
    result = subprocess.run(
        [str(function / "run.sh")],
        env=sam_build.clean_environ(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "built for arm64 but running on x86_64" in result.stderr
    assert "Architecture" in result.stderr


# What a cold start imports before it can answer: the app and the modules its
# build imports, the SSM and Secrets Manager clients, the policies and their models.
COLD_PATH_MODULES = (
    "policy_gateway.app",
    "policy_gateway.routes.endpoint",
    "policy_gateway.routes.messages",
    "policy_gateway.upstream.client",
    "policy_gateway.fallback.flag",
    "policy_gateway.policy_source",
    "policy_gateway.auth.authenticator",
    "aws_lambda_powertools.utilities.parameters",
    "uvicorn",
    "uvloop",
    "httptools",
    "gateway_policies.runtime.loader",
    "gateway_policies.builtin",
    "pydantic",
    "anthropic",
)


def _zip_round_trip(build: Path, into: Path) -> tuple[Path, Path]:
    """Zip each artifact as `sam deploy` does and unzip it as Lambda does."""
    import shutil
    import zipfile

    unpacked = []
    for name in (FUNCTION, LAYER):
        archive = into / f"{name}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in sorted((build / name).rglob("*")):
                zipped.write(path, path.relative_to(build / name))
        target = into / name
        shutil.unpack_archive(archive, target)
        unpacked.append(target)
    return unpacked[0], unpacked[1]


def test_bytecode_for_every_module_in_function_and_layer(sam_build_dir: Path) -> None:
    for tree in (sam_build_dir / FUNCTION, sam_build_dir / LAYER / "python"):
        sources = list(tree.rglob("*.py"))
        missing = [
            source
            for source in sources
            if not (source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc").is_file()
        ]
        assert sources
        assert not missing, missing[:5]


def test_python313_runs_the_bytecode_in_a_read_only_tree_after_a_zip_round_trip(
    sam_build_dir: Path, python313: sam_build.Python313, tmp_path: Path
) -> None:
    """Every source file is replaced by one that fails if Python compiles it: the
    imports succeed only if the interpreter takes each module from the shipped
    .pyc, unchecked, in a tree it cannot write to, with mtimes the zip reset."""
    function, layer = _zip_round_trip(sam_build_dir, tmp_path)
    for source in [*function.rglob("*.py"), *layer.rglob("*.py")]:
        source.write_text(f"raise ImportError('compiled from source: {source.name}')\n")
    for path in [function, layer, *function.rglob("*"), *layer.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        result = subprocess.run(
            [
                str(python313.executable),
                "-c",
                "import importlib, sys\n"
                f"for name in {COLD_PATH_MODULES!r}: importlib.import_module(name)\n"
                "print(len(sys.modules))",
            ],
            env={**sam_build.clean_environ(), "PYTHONPATH": f"{function}:{layer / 'python'}"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        for path in [function, layer, *function.rglob("*"), *layer.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout) > 300  # the imports above really pulled in the dependencies


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
def lambda_like_python(tmp_path: Path, python313: sam_build.Python313) -> Path:
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
    xray: XRayEndpoint,
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
        # Tracing on, as in Lambda, so the built tracing dependencies load too.
        "LAMBDA_TASK_ROOT": str(sam_build_dir / FUNCTION),
        "AWS_XRAY_DAEMON_ADDRESS": xray.address,
    }
    root = "1-5759e988-bd862e3fe1be46a994272793"
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
                "x-amzn-trace-id": f"Root={root};Parent=53995c3f42cd8ad8;Sampled=1",
            },
            timeout=30,
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _sse_events(response)

    kinds = [name for _, name, _ in events]
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
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
    # The call's own metrics, the set the alarms name (policy actions and tokens come
    # in documents of their own, with their own dimensions).
    (calls,) = [document for document in emf if names.METRIC_REQUESTS in document]
    directive = calls["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == names.METRICS_NAMESPACE
    assert directive["Dimensions"] == [["service"]]
    assert calls["service"] == names.SERVICE_NAME
    (span,) = xray.spans(expect=1)
    assert (span.name, span.xray_trace_id) == ("upstream policy attempt 1", root)


def test_run_sh_puts_the_layers_on_the_python_path() -> None:
    """Lambda sets no PYTHONPATH for Python runtimes: its own bootstrap adds the task
    root and /opt/python (where layers are mounted) to sys.path. Under the Web
    Adapter that bootstrap never runs, so run.sh must add them, or the policies
    layer cannot be imported in Lambda (the serving test above sets PYTHONPATH
    itself and cannot see this)."""
    run_sh = (ROOT / "functions" / "gateway" / "run.sh").read_text()
    assert "PYTHONPATH" in run_sh
    assert "/opt/python" in run_sh
