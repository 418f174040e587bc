"""The authoring guide's example policy runs as written: the file, the listing, the snippets."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gateway_policies import PolicyConfigError, load_chain
from gateway_policies.testing import run_request

from .support.cli import cli
from .support.fake_upstream import FakeUpstream
from .support.gateway import GatewayFactory
from .support.sdk import ask, both, sdk

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "policies" / "ticket_tagger.py"
GUIDE = ROOT / "docs" / "policies.md"
CONFIG = {"policies": [{"policy": "ticket_tagger:TicketTagger", "options": {"projects": ["OPS"]}}]}


@pytest.fixture(autouse=True)
def _example_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    # As in the layer, where the module sits next to gateway_policies on the path.
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def test_the_guide_lists_the_example_file_verbatim_in_under_40_lines() -> None:
    source = EXAMPLE.read_text()
    assert source in python_blocks(GUIDE.read_text())
    assert len(source.splitlines()) < 40


def test_the_guides_snippets_run() -> None:
    for block in python_blocks(GUIDE.read_text()):
        namespace: dict[str, Any] = {"__name__": "guide_snippet"}
        exec(compile(block, str(GUIDE), "exec"), namespace)
        for name, value in namespace.items():
            if name.startswith("test_") and callable(value):
                value()


def test_example_unit() -> None:
    chain = load_chain(CONFIG)
    policy = list(chain.policies)
    blocks = [{"type": "text", "text": "OPS-2 and OPS-10, not DEV-1"}]
    request = {
        "model": "m",
        "max_tokens": 9,
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [{"role": "user", "content": blocks}],
    }
    out = run_request(policy, request)
    assert out["system"][1] == {
        "type": "text",
        "text": "This conversation concerns ticket(s) OPS-10, OPS-2.",
    }
    untouched = request | {"messages": [{"role": "user", "content": "nothing here"}]}
    assert run_request(policy, untouched) == untouched
    with pytest.raises(PolicyConfigError, match="projects"):
        load_chain({"policies": [{"policy": "ticket_tagger:TicketTagger", "options": {}}]})


@both
def test_example_through_the_gateway(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    url = make_gateway(policy_config=json.dumps(CONFIG))
    ask(sdk(url), streaming, system="be brief", messages=[{"role": "user", "content": "OPS-7?"}])
    assert upstream.requests[0].json["system"] == (
        "be brief\n\nThis conversation concerns ticket(s) OPS-7."
    )


def test_make_test_policy_runs_a_policys_own_tests() -> None:
    """The guide's command, with the dev virtualenv's interpreter standing in for .venv's."""
    result = subprocess.run(
        [
            "make",
            "-s",
            "test-policy",
            "POLICY=examples/policies",
            f"BIN={Path(sys.executable).parent}",
            "STAMP=",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


def test_validate_says_how_to_put_a_policy_module_on_the_path(tmp_path: Path) -> None:
    chain = tmp_path / "chain.json"
    chain.write_text(json.dumps(CONFIG))
    refused = cli("policy", "validate", str(chain))
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert "No module named 'ticket_tagger'" in line
    assert line.endswith(
        "if ticket_tagger is your policy's module, put its folder on the import path: "
        "PYTHONPATH=<its folder> policy-gateway policy validate ..., or move it into "
        "layers/policies/ (the layer's folder, on the path of a deployed gateway)"
    )
    path = os.pathsep.join([str(EXAMPLE.parent), os.environ.get("PYTHONPATH", "")])
    accepted = cli("policy", "validate", str(chain), env={"PYTHONPATH": path})
    assert accepted.returncode == 0, accepted.stderr
