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
    """POLICIES, PASSTHROUGH or SWITCHED (docs/policies.md says which hooks see each route)."""


_BATCH = "/v1/messages/batches/{message_batch_id}"
_MESSAGES = "routes.messages:MessagesEndpoint"
_CREATE = "routes.batches:BatchCreateEndpoint"
_RESULTS = "routes.batch_results:ResultsEndpoint"
_OBJECTS = "routes.batches:BatchObjectEndpoint"
_MODELS = "routes.passthrough:PassthroughEndpoint"
_FILES = "routes.passthrough:FilesEndpoint"

ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute("/v1/messages", ("POST",), "messages", _MESSAGES, POLICIES),
    ApiRoute("/v1/messages/count_tokens", ("POST",), "count_tokens", _MESSAGES, POLICIES),
    ApiRoute("/v1/messages/batches", ("POST",), "batch_create", _CREATE, POLICIES),
    ApiRoute(f"{_BATCH}/results", ("GET",), "batch_results", _RESULTS, POLICIES),
    ApiRoute("/v1/messages/batches", ("GET",), "batch_list", _OBJECTS, PASSTHROUGH),
    ApiRoute(_BATCH, ("GET",), "batch_retrieve", _OBJECTS, PASSTHROUGH),
    ApiRoute(_BATCH, ("DELETE",), "batch_delete", _OBJECTS, PASSTHROUGH),
    ApiRoute(f"{_BATCH}/cancel", ("POST",), "batch_cancel", _OBJECTS, PASSTHROUGH),
    ApiRoute("/v1/models", ("GET",), "models", _MODELS, PASSTHROUGH),
    ApiRoute("/v1/models/{model_id}", ("GET",), "models", _MODELS, PASSTHROUGH),
    ApiRoute("/v1/files", None, "files", _FILES, SWITCHED),
    ApiRoute("/v1/files/{file_path:path}", None, "files", _FILES, SWITCHED),
)


def offered_by_bedrock(route: ApiRoute) -> bool:
    """Whether Amazon Bedrock has the route: it offers Messages and count_tokens, but no
    Message Batches, Models or Files API, so those answer 404 before any key is read."""
    return route.handler == _MESSAGES
