"""The Models API as the simulator answers it: a fixed catalogue, listed newest first.

Each entry is a model the simulator's Messages API answers (its id matches
KNOWN_MODELS), so a client that picks a model from `client.models.list()`
can call it. Only the fields the API always sends are filled in.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .simulated_errors import error
from .simulated_pages import PageRefused, page


def _model(model_id: str, name: str, released: str, line: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": model_id,
        "display_name": name,
        "created_at": f"{released}T00:00:00Z",
        "lifecycle": "active",
        "line": line,
        "deprecated_at": None,
        "retires_at": None,
        "max_input_tokens": 200_000,
        "max_tokens": 64_000,
    }


CATALOGUE = (
    _model("claude-sonnet-4-6", "Claude Sonnet 4.6", "2026-02-17", "sonnet"),
    _model("claude-opus-4-5", "Claude Opus 4.5", "2025-11-24", "opus"),
    _model("claude-haiku-4-5", "Claude Haiku 4.5", "2025-10-15", "haiku"),
    _model("claude-sonnet-4-5", "Claude Sonnet 4.5", "2025-09-29", "sonnet"),
    _model("claude-opus-4-1", "Claude Opus 4.1", "2025-08-05", "opus"),
)


async def list_models(request: Request) -> Response:
    try:
        return JSONResponse(page(CATALOGUE, request.query_params))
    except PageRefused as refused:
        return error(400, str(refused))


async def get_model(request: Request) -> Response:
    model_id = request.path_params["model_id"]
    for model in CATALOGUE:
        if model["id"] == model_id:
            return JSONResponse(model)
    return error(404, f"model: {model_id}")
