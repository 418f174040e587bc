"""Bedrock's exceptions as the Messages API's errors: the status and type a client expects."""

from __future__ import annotations

from .errors import error_body, error_type_for

# Bedrock's exceptions → the status and type the Messages API uses for the
# same situation. Anything else keeps Bedrock's own HTTP status.
EXCEPTIONS: dict[str, tuple[int, str]] = {
    "ValidationException": (400, "invalid_request_error"),
    "AccessDeniedException": (403, "permission_error"),
    "ResourceNotFoundException": (404, "not_found_error"),
    "ThrottlingException": (429, "rate_limit_error"),
    # "Resubmit your request later": a quota is a rate limit to a Messages API client.
    "ServiceQuotaExceededException": (429, "rate_limit_error"),
    "InternalServerException": (500, "api_error"),
    "ModelErrorException": (500, "api_error"),
    "ModelStreamErrorException": (500, "api_error"),
    "ServiceUnavailableException": (503, "api_error"),
    "ModelNotReadyException": (529, "overloaded_error"),
    "ModelTimeoutException": (504, "timeout_error"),
}


def exception_error(name: str, message: str, fallback_status: int) -> tuple[int, dict[str, object]]:
    """The Messages API status and error body for a Bedrock exception name."""
    # Stream exceptions are named in camelCase (`throttlingException`).
    status, kind = EXCEPTIONS.get(
        name[:1].upper() + name[1:], (fallback_status, error_type_for(fallback_status))
    )
    return status, error_body(status, message or name, kind)
