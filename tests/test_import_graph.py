"""The package tree is the architecture: imports run down it, never up, and never in a circle.

The rule, for the gateway (`policy_gateway`) and the policies layer
(`gateway_policies`), over every import in the source (inside functions and
under TYPE_CHECKING too, as a circle through a deferred import is still one):

1. No import circle between modules, and none between subpackages (a folder
   that imports another never gets imported back by it).
2. A module never imports its own package's `__init__` or an ancestor's.
3. A module never imports a module of an ancestor package ("above it"), except
   the ones that package shares with everything beneath it (`SHARED`): the
   per-call pieces and the configuration at the gateway's top, a package's
   interface for its implementations, the policy author's API for the built-in
   policies and the runtime. Imports sideways, into another subpackage, are
   free, and rule 1 keeps them one-way.
4. The policies never import the gateway.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from .support.servers import ROOT

pytestmark = pytest.mark.unit

PACKAGES = {
    "policy_gateway": ROOT / "functions" / "gateway" / "policy_gateway",
    "gateway_policies": ROOT / "layers" / "policies" / "gateway_policies",
}

SHARED: dict[str, frozenset[str]] = {
    "policy_gateway": frozenset(
        {
            "aws_reads",
            "call",
            "errors",
            "headers",
            "lambda_context",
            "names",
            "offload",
            "parameter_batch",
            "parameters",
            "policy_source",
            "settings",
        }
    ),
    # The interface the Anthropic and Bedrock providers implement.
    "policy_gateway.upstream": frozenset({"provider"}),
    # The deployed stack, which the doctor's checks read.
    "policy_gateway.cli": frozenset({"deployment"}),
    # What a policy is made of: the built-in policies and the runtime use it like any author.
    "gateway_policies": frozenset(
        {
            "actions",
            "base",
            # How an event's data is read without a parse: StreamEvent's, and the stream grammar's.
            "event_type",
            "exceptions",
            "numbers",
            "options",
            "recorder",
            "text",
            "tool_gate",
            "blocked_call",
            "tool_input",
            "tool_options",
            "tool_rules",
            "turns",
            "upstream_tools",
        }
    ),
    # What every rule module is built from.
    "gateway_policies.detect": frozenset({"rule", "shapes", "validators"}),
}

# The one import up the tree: `policy-gateway serve` runs the app, and the CLI,
# the operator's entry point, lives in the package it serves.
ENTRY_POINTS = {("policy_gateway.cli.main", "policy_gateway.app")}


@dataclass(frozen=True)
class Module:
    name: str
    path: Path

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def modules() -> dict[str, Module]:
    found = {}
    for top, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = [top, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = Module(".".join(parts), path)
    return found


def imports(module: Module, known: dict[str, Module]) -> Iterator[str]:
    """The modules of both packages that `module` imports, by name."""
    for node in ast.walk(ast.parse(module.path.read_text(), str(module.path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.package.split(".")[: len(module.package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source not in known:
                continue
            submodules = [f"{source}.{alias.name}" for alias in node.names]
            named = [name for name in submodules if name in known]
            yield from named
            if len(named) < len(submodules):
                yield source


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imports(module, known)) - {name} for name, module in known.items()}


def _ancestors(package: str) -> list[str]:
    parts = package.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def test_the_graph_sees_the_packages() -> None:
    edges = graph()
    assert "policy_gateway.routes.gateway" in edges
    assert "policy_gateway.upstream.client" in edges["policy_gateway.routes.gateway"]
    assert "policy_gateway.settings" in edges["policy_gateway.routes.gateway"]
    assert "gateway_policies.base" in edges["gateway_policies.runtime.chain"]


def test_no_module_imports_in_a_circle() -> None:
    try:
        TopologicalSorter(graph()).prepare()
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_no_subpackage_imports_in_a_circle() -> None:
    known = modules()
    folders: dict[str, set[str]] = {}
    for name, targets in graph().items():
        here = known[name].package.split(".")
        for target in targets:
            there = known[target].package.split(".")
            common = 0
            while common < min(len(here), len(there)) and here[common] == there[common]:
                common += 1
            if common < min(len(here), len(there)):
                # The two folders side by side under their closest common package.
                apart = (".".join(here[: common + 1]), ".".join(there[: common + 1]))
                folders.setdefault(apart[0], set()).add(apart[1])
    try:
        TopologicalSorter(folders).prepare()
    except CycleError as exc:
        raise AssertionError(f"subpackage circle: {' -> '.join(exc.args[1])}") from None


def upward_imports(known: dict[str, Module], edges: dict[str, set[str]]) -> list[str]:
    """The imports that break rules 2 and 3."""
    upward = []
    for name, targets in edges.items():
        above = _ancestors(known[name].package)
        for target in sorted(targets):
            module = known[target]
            if (name, target) in ENTRY_POINTS:
                continue
            if module.is_package and module.name in above:
                upward.append(f"{name} -> {target} (a package's __init__)")
            elif not module.is_package and module.package in above:
                inside = module.package == known[name].package
                leaf = target.rpartition(".")[2]
                if not inside and leaf not in SHARED.get(module.package, frozenset()):
                    upward.append(f"{name} -> {target}")
    return upward


def test_no_module_imports_a_module_above_it() -> None:
    assert upward_imports(modules(), graph()) == []


def test_the_policies_never_import_the_gateway() -> None:
    reaching = {
        f"{name} -> {target}"
        for name, targets in graph().items()
        if name.startswith("gateway_policies")
        for target in targets
        if target.startswith("policy_gateway")
    }
    assert reaching == set()


def test_the_rule_catches_imports_up_the_tree(tmp_path: Path) -> None:
    """Not vacuous: a route importing the app, its package's __init__ or the root's fails;
    importing the settings, a sibling or another subpackage does not."""
    known = modules()
    fake = Module("policy_gateway.routes.fake", tmp_path / "fake.py")
    fake.path.write_text(
        "from .. import settings\n"
        "from ..upstream.client import UpstreamClient\n"
        "from .body import read_body\n"
        "def later():\n"
        "    from ..app import create_app\n"
        "    from . import endpoint\n"
        "    from policy_gateway.routes import X\n"
        "    from .. import __version__\n"
    )
    known[fake.name] = fake
    edges = {fake.name: set(imports(fake, known))}
    assert upward_imports(known, edges) == [
        "policy_gateway.routes.fake -> policy_gateway (a package's __init__)",
        "policy_gateway.routes.fake -> policy_gateway.app",
        "policy_gateway.routes.fake -> policy_gateway.routes (a package's __init__)",
    ]


def test_the_circle_check_catches_a_deferred_import(tmp_path: Path) -> None:
    known = modules()
    edges = graph()
    fake = Module("policy_gateway.upstream.fake", tmp_path / "fake.py")
    fake.path.write_text("def later():\n    from ..routes.endpoint import Gateway\n")
    known[fake.name] = fake
    edges[fake.name] = set(imports(fake, known))
    edges["policy_gateway.routes.endpoint"].add(fake.name)
    with pytest.raises(CycleError):
        TopologicalSorter(edges).prepare()
