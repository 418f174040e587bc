"""Which JSON paths differ between two documents.

The fallback's log and trace name the paths a policy changed, never their
content, so an operator can see which policy broke a request without the
request's text reaching a log.
"""

from __future__ import annotations

from typing import Any


def changed_paths(before: Any, after: Any, path: str = "$") -> list[str]:
    """Paths (JSONPath-like, `$.messages[0].content`) whose values differ."""
    if type(before) is not type(after):
        return [path]
    if isinstance(before, dict):
        paths: list[str] = []
        for key in before.keys() | after.keys():
            child = f"{path}.{key}"
            if key not in before or key not in after:
                paths.append(child)
            else:
                paths.extend(changed_paths(before[key], after[key], child))
        return sorted(paths)
    if isinstance(before, list):
        if len(before) != len(after):
            return [path]
        paths = []
        for index, (left, right) in enumerate(zip(before, after, strict=True)):
            paths.extend(changed_paths(left, right, f"{path}[{index}]"))
        return paths
    return [] if before == after else [path]
