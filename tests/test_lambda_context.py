"""What the Lambda Web Adapter's headers say about the call (policy_gateway.lambda_context)."""

from __future__ import annotations

import json

import pytest
from policy_gateway.lambda_context import InvocationContext, from_headers

pytestmark = pytest.mark.unit

LAMBDA = json.dumps(
    {
        "request_id": "8f5e-lambda",
        "deadline": 1764547200123,
        "invoked_function_arn": "arn:aws:lambda:us-east-1:123456789012:function:gw",
        "xray_trace_id": "Root=1-abc",
    }
)
URL = json.dumps({"requestId": "url-req-1", "http": {"method": "POST"}})


def test_both_headers() -> None:
    assert from_headers(LAMBDA, URL) == InvocationContext(
        request_id="8f5e-lambda", deadline_epoch=1764547200.123, url_request_id="url-req-1"
    )


def test_locally_neither_header_exists() -> None:
    assert from_headers(None, None) == InvocationContext()


@pytest.mark.parametrize("value", ["", "not json", "[1]", '"text"', "null"])
def test_an_unreadable_header_is_as_if_absent(value: str) -> None:
    assert from_headers(value, value) == InvocationContext()


@pytest.mark.parametrize("deadline", ["1764547200123", None, [1], {"ms": 1}])
def test_a_deadline_that_is_not_a_number_is_none(deadline: object) -> None:
    context = from_headers(json.dumps({"request_id": "r", "deadline": deadline}), None)
    assert context.deadline_epoch is None
    assert context.request_id == "r"


def test_empty_ids_are_none_and_numeric_ids_are_strings() -> None:
    context = from_headers(json.dumps({"request_id": ""}), json.dumps({"requestId": 42}))
    assert context.request_id is None
    assert context.url_request_id == "42"
