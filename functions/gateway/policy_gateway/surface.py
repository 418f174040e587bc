"""The API surface the gateway serves, and what each route gets.

Every route is one of: run through the policies, passed through on purpose
(no policy has anything to judge there), or refused unless the operator
allows it. Any path not listed here is an Anthropic-shaped 404 that never
reaches the upstream, so no route leads around the policies by accident.

Handlers are named `module:Class` and imported on a route's first call, so
listing a route costs the cold start nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

POLICIES = "policies"
PASSTHROUGH = "passthrough"
SWITCHED = "refused unless allowed"


@dataclass(frozen=True)
class ApiRoute:
    path: str
    methods: tuple[str, ...] | None
    """None: every method (the Files API's, whatever they become)."""
    endpoint: str
    """The name on the call's log line."""
    handler: str
    coverage: str
    hooks: str
    """Which policy hooks see this route's traffic (README, docs/policies.md)."""


_BATCH = "/v1/messages/batches/{message_batch_id}"
_OBJECTS = "batches:BatchObjectEndpoint"
_MODELS = "passthrough:PassthroughEndpoint"
_FILES = "passthrough:FilesEndpoint"

ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "/v1/messages",
        ("POST",),
        "messages",
        "pipeline:MessagesEndpoint",
        POLICIES,
        "on_request; on_response or on_stream_event / on_stream_end",
    ),
    ApiRoute(
        "/v1/messages/count_tokens",
        ("POST",),
        "count_tokens",
        "pipeline:MessagesEndpoint",
        POLICIES,
        "on_request (endpoint `count_tokens`)",
    ),
    ApiRoute(
        "/v1/messages/batches",
        ("POST",),
        "batch_create",
        "batches:BatchCreateEndpoint",
        POLICIES,
        "on_request on every entry's `params` (endpoint `messages`, not streaming)",
    ),
    ApiRoute(
        f"{_BATCH}/results",
        ("GET",),
        "batch_results",
        "batch_results:ResultsEndpoint",
        POLICIES,
        "on_response on every succeeded entry's `message`",
    ),
    ApiRoute("/v1/messages/batches", ("GET",), "batch_list", _OBJECTS, PASSTHROUGH, "none"),
    ApiRoute(_BATCH, ("GET",), "batch_retrieve", _OBJECTS, PASSTHROUGH, "none"),
    ApiRoute(_BATCH, ("DELETE",), "batch_delete", _OBJECTS, PASSTHROUGH, "none"),
    ApiRoute(f"{_BATCH}/cancel", ("POST",), "batch_cancel", _OBJECTS, PASSTHROUGH, "none"),
    ApiRoute("/v1/models", ("GET",), "models", _MODELS, PASSTHROUGH, "none"),
    ApiRoute("/v1/models/{model_id}", ("GET",), "models", _MODELS, PASSTHROUGH, "none"),
    ApiRoute("/v1/files", None, "files", _FILES, SWITCHED, "none"),
    ApiRoute("/v1/files/{file_path:path}", None, "files", _FILES, SWITCHED, "none"),
)
