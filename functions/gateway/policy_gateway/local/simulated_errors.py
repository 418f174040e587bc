"""What the Messages API simulator refuses, and how: the API's error shapes, marked as its own.

Every 404 it sends says that the simulator answered it, so an operator who
meets one in a local run does not take it for the real API's (or the
gateway's) verdict on the route, the model or the batch.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.responses import JSONResponse

from ..errors import error_body
from .simulated_reply import request_problem

# Current model families answer; anything else (a typo, a retired model such as
# claude-instant-1.2) is a 404 `not_found_error`, as the real API answers.
KNOWN_MODELS = re.compile(r"^claude-(?:(?:opus|sonnet|haiku|fable|mythos)-\d[\w.-]*|3-[\w.-]+)$")
SIMULATOR = "the gateway's upstream simulator"


def request_id() -> str:
    return f"req_sim_{uuid.uuid4().hex[:20]}"


def error_document(status: int, message: str) -> dict[str, Any]:
    """The API's error body for `status`; a 404's or 405's message names the simulator."""
    if status in (404, 405):
        message = f"{message} ({SIMULATOR} does not serve it)"
    return {**error_body(status, message), "request_id": request_id()}


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse(error_document(status, message), status_code=status)


def refusal(body: Any, count_tokens: bool) -> tuple[int, str] | None:
    """The status and message the API would refuse this Messages body with, or None."""
    if isinstance(body, dict):
        model = body.get("model")
        if not isinstance(model, str):
            return 400, "model: Field required"
        if not KNOWN_MODELS.match(model):
            return 404, f"model: {model}"
    problem = request_problem(body, count_tokens)
    return None if problem is None else (400, problem)
