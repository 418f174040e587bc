"""What the Lambda Web Adapter tells us about the invocation, read from headers.

`x-amzn-lambda-context` carries request_id, deadline (epoch milliseconds),
invoked_function_arn and xray_trace_id; `x-amzn-request-context` carries the
Function URL's requestContext. Locally neither exists and every field is None.

With the Function URL's `AuthType: AWS_IAM`, the requestContext names the
signed caller (`authorizer.iam.userArn`); Lambda verified the signature, and
the adapter writes this header itself, so it is the caller's identity
(`auth.caller` folds it to what its holder does not choose). Only `userArn` is
read: `userId` is `<account>:<name>` for a federated user, a name its holder picks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InvocationContext:
    request_id: str | None = None
    deadline_epoch: float | None = None
    url_request_id: str | None = None
    url_domain: str | None = None
    """The Function URL's own host name, as Lambda saw the request arrive."""
    iam_principal: str | None = None


def _json_header(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    try:
        loaded = json.loads(value)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def from_headers(lambda_context: str | None, request_context: str | None) -> InvocationContext:
    lam = _json_header(lambda_context)
    req = _json_header(request_context)
    deadline = lam.get("deadline")
    authorizer = req.get("authorizer")
    iam = authorizer.get("iam") if isinstance(authorizer, dict) else None
    principal = iam.get("userArn") if isinstance(iam, dict) else None
    return InvocationContext(
        request_id=str(lam["request_id"]) if lam.get("request_id") else None,
        deadline_epoch=deadline / 1000 if isinstance(deadline, int | float) else None,
        url_request_id=str(req["requestId"]) if req.get("requestId") else None,
        url_domain=str(req["domainName"]) if req.get("domainName") else None,
        iam_principal=principal if isinstance(principal, str) and principal else None,
    )
