"""A gateway's call line (`call finished`, JSON) as one line an operator reads at a glance.

    2026-01-01T12:00:00.123+00:00 200 messages 41ms caller=ops chain=default@v3:1a2b3c4d
      model=claude-sonnet-4-6 tokens=50/7 fallback=none
      | redact_secrets redact where=request kind=aws_access_key_id count=1

(one line: time, status, endpoint and latency, the caller, the chain and its
version, the model, input/output tokens, the fallback's outcome, then each
policy action with its details, `[shadow]` for a shadow policy's). The fields
are observability/audit.py's and routes/endpoint.py's; a field a line lacks
is left out, so older lines read too.
"""

from __future__ import annotations

import json
from typing import Any

from .. import names

# A log line that is a CloudWatch Embedded Metric Format document carries this key.
EMF_KEY = "_aws"


def parse(text: str) -> dict[str, Any] | None:
    """The JSON object a log line holds, or None for any other line (a banner, a traceback)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def is_call_line(line: dict[str, Any]) -> bool:
    return line.get("message") == names.LOG_CALL_FINISHED and EMF_KEY not in line


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def action_text(action: Any) -> str:
    """`policy action key=value ...`, `[shadow]` last for what a shadow policy would have done."""
    if not isinstance(action, dict):
        return _value(action)
    details = {k: v for k, v in action.items() if k not in ("policy", "action", "shadow")}
    words = [str(action.get("policy", "?")), str(action.get("action", "?"))]
    words += [f"{key}={_value(value)}" for key, value in details.items()]
    if action.get("shadow") is True:
        words.append("[shadow]")
    return " ".join(words)


def _head(line: dict[str, Any], when: str | None) -> list[str]:
    words = [str(line.get("timestamp") or when or "-"), str(line.get("status", "-"))]
    if "endpoint" in line:
        words.append(str(line["endpoint"]))
    if isinstance(line.get("latency_ms"), int | float):
        words.append(f"{round(line['latency_ms'])}ms")
    return words


def _who_and_what(line: dict[str, Any]) -> list[str]:
    words = [f"caller={line.get('caller') or '-'}"]
    chain = line.get("chain") or "-"
    words.append(
        f"chain={chain}@{line['chain_version']}" if "chain_version" in line else f"chain={chain}"
    )
    if "model" in line:
        words.append(f"model={line['model']}")
    if "input_tokens" in line or "output_tokens" in line:
        words.append(f"tokens={line.get('input_tokens', 0)}/{line.get('output_tokens', 0)}")
    if "fallback" in line:
        words.append(f"fallback={line['fallback']}")
    return words


def readable(line: dict[str, Any], when: str | None = None) -> str:
    """One call line as one readable line; `when` stands in for a line without a timestamp."""
    text = " ".join(_head(line, when) + _who_and_what(line))
    actions = line.get("policy_actions")
    parts = [action_text(action) for action in actions] if isinstance(actions, list) else []
    if line.get("policy_actions_omitted"):
        parts.append(f"+{line['policy_actions_omitted']} more")
    return f"{text} | {'; '.join(parts)}" if parts else text
