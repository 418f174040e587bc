"""The one format of a secret that holds an Anthropic API key.

The gateway reads its upstream key from such a secret, and tool_call_judge
falls back to the same secret; both parse it here, so they accept exactly the
same values.
"""

from __future__ import annotations

import json


def parse_api_key(text: str) -> str:
    """The key from a plain string or `{"api_key": "..."}`; ValueError otherwise."""
    key: object = text.strip()
    if text.lstrip().startswith("{"):
        try:
            key = json.loads(text).get("api_key")
        except (ValueError, AttributeError):
            key = None
    if not isinstance(key, str) or not key.strip() or not key.strip().isascii():
        raise ValueError('an API key secret must be a string or {"api_key": "..."}')
    return key.strip()
