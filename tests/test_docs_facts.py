"""Sentences of the docs that state a fact of the template or the code, held to it (issue 39).

Each test reads one section of a document and the artifact it describes: the Web
Adapter layer the template deploys by default, the TTLs "SSM at scale" says how to
change, the `ctx.record` signature "Writing a policy" shows, the rotation bound
deploy.md states.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from gateway_policies import PolicyContext
from gateway_policies.actions import ACTIONS
from policy_gateway import settings
from policy_gateway.cli import key_changes

from .support.cfn import Stack, load_template
from .support.docs import section

pytestmark = pytest.mark.unit

TEMPLATE = load_template()
LAYER = re.compile(
    r"arn:aws:lambda:([a-z0-9-]+|<region>):(\d+):layer:(LambdaAdapterLayer\w+):(\d+)"
)


def _function(architecture: str | None = None) -> Any:
    parameters = {"Architecture": architecture} if architecture else None
    return Stack(TEMPLATE, "docs", region="eu-west-1", parameters=parameters).resources()[
        "GatewayFunction"
    ]["Properties"]


def _adapter_layer(architecture: str | None = None) -> tuple[str, str, str]:
    """(account, layer name, version) of the adapter layer a stack of the template gets."""
    (found,) = [
        match for arn in _function(architecture)["Layers"] if (match := LAYER.fullmatch(str(arn)))
    ]
    return found[2], found[3], found[4]


def test_the_web_adapter_section_checks_the_layer_of_the_default_architecture() -> None:
    text = section("docs/deploy.md", "### The Web Adapter layer in your region")
    default = TEMPLATE["Parameters"]["Architecture"]["Default"]
    assert default == "arm64"
    shown = {(m[2], m[3], m[4]) for m in LAYER.finditer(text)}
    # Every layer named is one the template deploys, for one architecture or the other.
    assert shown == {_adapter_layer("arm64"), _adapter_layer("x86_64")}
    # The command to run checks the default architecture's layer, in the region it names.
    command = next(block for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL))
    checked = LAYER.search(command)
    assert checked is not None, command
    assert (checked[2], checked[3], checked[4]) == _adapter_layer()
    assert checked[1] in command.split("--region ")[1].split()[0]
    assert f"`{default}` (the\ndefault `Architecture`)" in text


def test_ssm_at_scale_says_where_the_ttls_are_set_as_the_template_sets_them() -> None:
    text = section("docs/deploy.md", "## SSM at scale: one call per refresh, and the quota")
    environment = _function()["Environment"]["Variables"]
    for name in (settings.ENV_FLAG_TTL, settings.ENV_POLICY_CONFIG_TTL):
        assert f"`{name}`" in text
        assert name not in TEMPLATE["Parameters"]
        assert f'sets each to `"{environment[name]}"`' in text
    assert "not template parameters" in text
    assert "template parameters of the same names" not in text


def test_writing_a_policy_shows_ctx_record_as_it_is() -> None:
    text = section("docs/policies.md", "## Writing a policy")
    shown = re.search(r"^def record\((.*)\) -> (\w+): \.\.\.$", text, re.MULTILINE)
    assert shown is not None
    actual = inspect.signature(PolicyContext.record)
    assert f"({shown[1]}) -> {shown[2]}" == str(actual).replace("'", "")
    listed = re.search(r"`action` is one of\n?(.*?)\(anything", text, re.DOTALL)
    assert listed is not None
    assert set(re.findall(r"`(\w+)`", listed[1])) == ACTIONS


def test_deploy_md_states_the_rotation_bound_the_code_computes() -> None:
    """The bound deploy.md gives is `refused_everywhere`'s, and the line it quotes is the
    command's (tests/test_keys_cli.py runs the command)."""
    text = section("docs/deploy.md", "## 4. Gateway keys: `policy-gateway keys`")
    assert "the later of the grace's end and\n  the write + `SECRETS_TTL_SECONDS`" in text
    assert key_changes.refused_everywhere(0.0, 0.0, settings.DEFAULT_SECRETS_TTL) == 60
    assert f"`SECRETS_TTL_SECONDS` (default {settings.DEFAULT_SECRETS_TTL:g})" in text
    kept_days = key_changes.EXPIRED_KEPT_SECONDS / 86400
    assert f"for {kept_days:g} days" in text
    quoted = re.search(r"\(`(the old key works until .*?)`\)", text, re.DOTALL)
    assert quoted is not None
    assert " ".join(quoted[1].split()).startswith(
        "the old key works until 03:32:17Z (--grace 0) on the gateways that have read this "
        "change, and until at most 03:33:17Z on those that read the keys before it"
    )
