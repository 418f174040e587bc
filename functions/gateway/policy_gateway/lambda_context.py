"""What the Lambda Web Adapter tells us about the invocation, read from headers.

`x-amzn-lambda-context` carries request_id, deadline (epoch milliseconds),
invoked_function_arn and xray_trace_id; `x-amzn-request-context` carries the
Function URL's requestContext. Locally neither exists and every field is None.

With the Function URL's `AuthType: AWS_IAM`, the requestContext names the
signed caller (`authorizer.iam.userArn`); Lambda verified the signature, and
the adapter writes this header itself, so it is the caller's identity.
An assumed-role session names a session its holder chose, so the caller (and
its fallback budget) is the role; the session ARN stays on the log lines as
`principal`.
"""

from __future__ import annotations

import json
import re
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

    @property
    def iam_caller(self) -> str | None:
        """The principal as budgeted: an assumed-role session as its role's ARN."""
        if self.iam_principal is None:
            return None
        session = _ASSUMED_ROLE.fullmatch(self.iam_principal)
        if session is None:
            return self.iam_principal
        partition, account, role = session.group("partition", "account", "role")
        # The role's path is not in a session's ARN; its name is unique in the account.
        return f"arn:{partition}:iam::{account}:role/{role}"


_ASSUMED_ROLE = re.compile(
    r"arn:(?P<partition>[a-z-]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/[^/]+"
)


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
