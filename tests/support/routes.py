"""The gateway's routes as requests a test can send, from the surface definition itself."""

from __future__ import annotations

import re
from collections.abc import Iterable

from policy_gateway.surface import ApiRoute

# A value for each path parameter the surface names.
SAMPLE_IDS = {
    "message_batch_id": "msgbatch_1",
    "model_id": "claude-sonnet-4-5",
    "file_path": "file_1",
}
# A route open to every method (the Files API's) is sent these.
ANY_METHOD = ("GET", "POST")


def requests_for(routes: Iterable[ApiRoute]) -> list[tuple[str, str]]:
    """(method, path) for each method of each route, its parameters filled in."""
    return [
        (method, re.sub(r"\{(\w+)(?::\w+)?\}", lambda match: SAMPLE_IDS[match[1]], route.path))
        for route in routes
        for method in route.methods or ANY_METHOD
    ]
