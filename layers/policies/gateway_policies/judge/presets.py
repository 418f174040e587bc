"""rules_judge's presets: each a written rule and the pre-filter that picks what it judges.

The pre-filter is cheap (tool_rules' matching) and wide: it only keeps the
judge from being asked about calls no rule could concern; the judge decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tool_rules import ToolRule

_SHELL = r"(?i)bash|shell|terminal|command|exec"
_EDIT = r"(?i)write|edit|create|str_replace|notebook"

PACKAGE_MANAGERS = (
    "uv", "pip", "pipx", "poetry", "pipenv", "conda", "npm", "yarn", "pnpm", "bun", "cargo",
    "gem", "bundle", "composer", "brew", "apt", "apt-get",
)  # fmt: skip


@dataclass(frozen=True)
class Preset:
    rules: str
    when: tuple[ToolRule, ...]


def _dangerous_commands() -> Preset:
    return Preset(
        "Block shell commands that destroy data or systems beyond the project's own working "
        "files: recursive deletion of a home, root or system directory (rm -rf ~, rm -rf /, "
        "/etc, /usr), formatting or overwriting disks (mkfs, dd to a device), fork bombs, "
        "recursive permission changes on system paths, stopping or disabling security "
        "tooling, force-pushing over shared history, dropping databases. Deleting the "
        "project's own build output (rm -rf ./build, node_modules) is allowed.",
        (ToolRule(tool=_SHELL),),
    )


_SENSITIVE = (
    r"(?i)\.ssh|\.aws|\.gnupg|\.kube|\.docker/config|\.netrc|\.npmrc|\.pypirc|\.env\b|"
    r"\.pem\b|id_rsa|id_ed25519|/etc/|\.bashrc|\.zshrc|\.profile|\.git/hooks|credentials|"
    r"secrets?\.(json|ya?ml|toml)"
)


def _sensitive_file_writes() -> Preset:
    return Preset(
        "Block writing, editing, moving or deleting files that hold credentials or configure "
        "the machine: SSH, cloud and package-registry credentials (~/.ssh, ~/.aws, .netrc, "
        ".npmrc, .pypirc), private keys, .env files, /etc, shell start-up files (~/.bashrc, "
        "~/.zshrc, ~/.profile) and git hooks. Reading them is not this rule's concern; "
        "editing the project's own source and configuration is allowed.",
        (ToolRule(tool=_EDIT, input=_SENSITIVE), ToolRule(tool=_SHELL, input=_SENSITIVE)),
    )


def _network_egress() -> Preset:
    return Preset(
        "Block tool calls that send the project's data or the machine's secrets to a host "
        "outside the project: uploads with curl or wget (POST, -d, -F, -T), netcat, scp, "
        "rsync or ssh to a remote host, piping a file or an environment variable to the "
        "network, DNS lookups that carry data. Downloading packages or documentation, and "
        "requests to localhost, are allowed.",
        (
            ToolRule(
                tool=_SHELL,
                input=r"(?i)\b(curl|wget|nc|ncat|netcat|scp|rsync|ssh|sftp|ftp|telnet|"
                r"socat|dig|nslookup|Invoke-WebRequest|Invoke-RestMethod)\b|https?://",
            ),
            ToolRule(tool=r"(?i)fetch|http|request|webhook|upload"),
        ),
    )


def _package_manager(use: str) -> Preset:
    others = ", ".join(name for name in PACKAGE_MANAGERS if name != use)
    return Preset(
        f"This project manages its packages with {use}. Block commands that install, add, "
        f"remove or upgrade packages with any other tool ({others}), including through "
        f"`python -m pip`; suggest the {use} equivalent in the reason. Commands of {use} "
        "itself, and running the project's own scripts and tests, are allowed.",
        (
            ToolRule(
                tool=_SHELL,
                input=r"(?i)\b("
                + "|".join(p.replace("-", r"\-") for p in PACKAGE_MANAGERS)
                + r"|go\s+(get|install)|-m\s+pip)\b",
            ),
        ),
    )


_TEST_PATH = (
    r"(?i)(^|[/\\\"' ])(tests?/|__tests__/|spec/|test_[^/\"]*\.py|[^/\"]*_test\.(py|go|rb)|"
    r"[^/\"]*\.(test|spec)\.[cm]?[jt]sx?|conftest\.py|pytest\.ini|jest\.config|\.coveragerc)"
)


def _test_weakening() -> Preset:
    return Preset(
        "Block changes that weaken a test to make it pass: deleting or skipping a test "
        "(skip, xfail, only), loosening an assertion (assert x == 3 becomes assert x, or "
        "an exact value becomes a range), widening a tolerance, catching and ignoring a "
        "failure, or lowering a coverage threshold. Renaming, moving or refactoring a test "
        "without changing what it checks is allowed, and so is adding or strengthening tests.",
        (ToolRule(tool=_EDIT, input=_TEST_PATH), ToolRule(tool=_SHELL, input=_TEST_PATH)),
    )


PRESET_NAMES = (
    "dangerous_commands",
    "sensitive_file_writes",
    "network_egress",
    "package_manager",
    "test_weakening",
)


def preset(name: str, use: str | None = None) -> Preset:
    """The preset `name` (one of PRESET_NAMES); `use` is package_manager's tool."""
    if name == "package_manager":
        if not use:
            raise ValueError("the package_manager preset needs `use` (the tool to keep to)")
        return _package_manager(use)
    return {
        "dangerous_commands": _dangerous_commands,
        "sensitive_file_writes": _sensitive_file_writes,
        "network_egress": _network_egress,
        "test_weakening": _test_weakening,
    }[name]()
