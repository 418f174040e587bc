"""Bedrock's exceptions as the Messages API's errors: the status and type a client expects."""

from __future__ import annotations

from ...errors import error_body

# Bedrock's exceptions → the status the Messages API uses for the same situation
# (the error's type follows from the status, as for the gateway's own errors).
# Anything else keeps Bedrock's own HTTP status.
EXCEPTIONS: dict[str, int] = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ThrottlingException": 429,
    # "Resubmit your request later": a quota is a rate limit to a Messages API client.
    "ServiceQuotaExceededException": 429,
    "InternalServerException": 500,
    "ModelErrorException": 500,
    "ModelStreamErrorException": 500,
    "ServiceUnavailableException": 503,
    "ModelNotReadyException": 529,
    "ModelTimeoutException": 504,
}


def exception_error(name: str, message: str, fallback_status: int) -> tuple[int, dict[str, object]]:
    """The Messages API status and error body for a Bedrock exception name."""
    # Stream exceptions are named in camelCase (`throttlingException`).
    status = EXCEPTIONS.get(name[:1].upper() + name[1:], fallback_status)
    return status, error_body(status, message or name)
