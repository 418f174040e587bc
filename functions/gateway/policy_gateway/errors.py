"""Anthropic-shaped errors: every error a client sees has the API's own shape.

Status and type follow the Messages API, so an SDK raises the same exception
class whether the error came from the gateway or from Anthropic.
"""

from __future__ import annotations

import json

ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


# The status each error type stands for, where an error arrives without one (an
# `error` event after a stream's 200): the API's own pairs, 500 for a type it never sent.
STATUS_OF_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def status_of_type(error_type: str) -> int:
    return STATUS_OF_TYPE.get(error_type, 500)


def error_type_for(status: int) -> str:
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str, error_type: str | None = None) -> dict[str, object]:
    return {
        "type": "error",
        "error": {"type": error_type or error_type_for(status), "message": message},
    }


def error_bytes(status: int, message: str, error_type: str | None = None) -> bytes:
    return json.dumps(error_body(status, message, error_type)).encode()


class GatewayError(Exception):
    """An error the gateway itself answers with, before or instead of the upstream."""

    def __init__(self, status: int, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type or error_type_for(status)

    def to_bytes(self) -> bytes:
        return error_bytes(self.status, self.message, self.error_type)
