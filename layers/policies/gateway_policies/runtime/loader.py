"""Build a PolicyDocument (and its PolicyChains) from the chain JSON.

Format: `{"policies": [{"policy": "<builtin name or module:Class>", "options": {...}}],
"callers": {"<caller>": {"policies": [...]}, "group:<g>": {"policies": [...]}}}`
(`callers` optional); an entry may add `"mode": "shadow"` (default `"enforce"`).
Every chain is validated; one bad chain refuses the whole document.
Built-in policies are imported only when a chain names them, so a policy that
is not configured costs nothing at cold start.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

from ..base import Policy
from ..exceptions import PolicyConfigError
from .chain import DEFAULT_CHAIN, PolicyChain
from .document import GROUP_PREFIX, PolicyDocument

ENFORCE = "enforce"
SHADOW = "shadow"
"""A chain entry's `mode`: enforced (the default), or run on copies and only recorded."""
CALLER_ENTRY_KEYS = frozenset({"policies", "limits", "record"})
"""A `callers` entry's keys: its chain, and what the gateway itself reads and validates
beside it (`limits`: policy_gateway/limits/config.py; `record`:
policy_gateway/records/option.py); the layer only lets them through."""

BUILTIN_POLICIES: dict[str, str] = {
    "noop": "gateway_policies.builtin.noop:Noop",
    "string_replace": "gateway_policies.builtin.string_replace:StringReplace",
    "inject_system_prompt": "gateway_policies.builtin.inject_system_prompt:InjectSystemPrompt",
    "redact_secrets": "gateway_policies.builtin.redact_secrets:RedactSecrets",
    "rewrite_model": "gateway_policies.builtin.rewrite_model:RewriteModel",
    "cap_max_tokens": "gateway_policies.builtin.cap_max_tokens:CapMaxTokens",
    "strip_tools": "gateway_policies.builtin.strip_tools:StripTools",
    "block_tool_calls": "gateway_policies.builtin.block_tool_calls:BlockToolCalls",
    "flow_guard": "gateway_policies.builtin.flow_guard:FlowGuard",
    "tool_call_judge": "gateway_policies.builtin.tool_call_judge:ToolCallJudge",
    "rules_judge": "gateway_policies.builtin.rules_judge:RulesJudge",
}


def _resolve(reference: str) -> type[Policy[Any]]:
    target = BUILTIN_POLICIES.get(reference, reference)
    module_name, sep, class_name = target.partition(":")
    if not sep or not module_name or not class_name:
        raise PolicyConfigError(
            f"unknown policy {reference!r}: use a built-in name "
            f"({', '.join(sorted(BUILTIN_POLICIES))}) or 'module:Class'"
        )
    try:
        found = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise PolicyConfigError(f"cannot import policy {reference!r}: {exc}") from exc
    except Exception as exc:
        # A custom module that fails while importing is a config error too: it
        # must leave the last good chain serving, not take the gateway down.
        raise PolicyConfigError(
            f"importing policy {reference!r} raised {type(exc).__name__}"
        ) from exc
    if not (isinstance(found, type) and issubclass(found, Policy)):
        raise PolicyConfigError(f"{reference!r} is not a Policy subclass")
    return found


def _build(kind: type[Policy[Any]], options: Mapping[str, Any]) -> Policy[Any]:
    try:
        return kind(options)
    except PolicyConfigError:
        raise
    except Exception as exc:
        # A policy whose setup fails is a config error too: the last good chain
        # keeps serving. The type only: the message may quote an option's value.
        raise PolicyConfigError(f"{kind.__name__} failed to set up ({type(exc).__name__})") from exc


def load_document(config: str | bytes | Mapping[str, Any]) -> PolicyDocument:
    """Parse and validate a whole document; raise PolicyConfigError with a clear message."""
    if isinstance(config, str | bytes):
        try:
            config = json.loads(config)
        except ValueError as exc:
            raise PolicyConfigError(f"policy config is not valid JSON: {exc}") from exc
    if not isinstance(config, Mapping) or not isinstance(config.get("policies"), list):
        raise PolicyConfigError('policy config must be an object {"policies": [...]}')
    default = _chain(config["policies"], "policies", DEFAULT_CHAIN)
    callers = config.get("callers", {})
    if not isinstance(callers, Mapping):
        raise PolicyConfigError('callers must be an object {"<caller>": {"policies": [...]}}')
    by_caller: dict[str, PolicyChain] = {}
    by_group: dict[str, PolicyChain] = {}
    for key, entry in callers.items():
        where = f"callers[{key!r}]"
        group = key[len(GROUP_PREFIX) :] if key.startswith(GROUP_PREFIX) else None
        if not key.strip() or (group is not None and not group.strip()):
            raise PolicyConfigError(f"{where}: a caller or group name must not be empty")
        if not isinstance(entry, Mapping) or not isinstance(entry.get("policies"), list):
            raise PolicyConfigError(f'{where} must be an object {{"policies": [...]}}')
        if set(entry) - CALLER_ENTRY_KEYS:
            raise PolicyConfigError(
                f"{where} has unknown keys {sorted(set(entry) - CALLER_ENTRY_KEYS)}"
            )
        chain = _chain(entry["policies"], f"{where}.policies", key)
        if group is None:
            by_caller[key] = chain
        else:
            by_group[group] = chain
    return PolicyDocument(default, by_caller, by_group)


def load_chain(config: str | bytes | Mapping[str, Any]) -> PolicyChain:
    """The default chain of a document, every chain of it validated (see load_document)."""
    return load_document(config).default


def _chain(entries: list[Any], where: str, name: str) -> PolicyChain:
    by_mode: dict[str, list[Policy[Any]]] = {ENFORCE: [], SHADOW: []}
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("policy"), str):
            raise PolicyConfigError(f"{where}[{index}] needs a string 'policy'")
        unknown = set(entry) - {"policy", "options", "mode"}
        if unknown:
            raise PolicyConfigError(f"{where}[{index}] has unknown keys {sorted(unknown)}")
        options = entry.get("options") or {}
        if not isinstance(options, Mapping):
            raise PolicyConfigError(f"{where}[{index}].options must be an object")
        mode = entry.get("mode", ENFORCE)
        if not isinstance(mode, str) or mode not in by_mode:
            raise PolicyConfigError(f"{where}[{index}].mode must be {ENFORCE!r} or {SHADOW!r}")
        try:
            by_mode[mode].append(_build(_resolve(entry["policy"]), options))
        except PolicyConfigError as exc:
            raise PolicyConfigError(f"{where}[{index}]: {exc}") from exc
    return PolicyChain(by_mode[ENFORCE], shadow=by_mode[SHADOW], name=name)
