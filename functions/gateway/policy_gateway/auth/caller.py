"""Who a call is, for its chain and its fallback budget: never a name its holder picks.

One rule of precedence (docs/policies.md, "Who the caller is"):

1. A gateway key (`AUTH_MODE=gateway_key`, where one is required on every call)
   names the caller, with its groups, whatever the Function URL's AuthType: the
   operator issued it, and the chain document's `callers` name keys and groups.
   A signed IAM principal is then recorded beside it, as `principal`.
2. Else a signed IAM principal (`AuthType: AWS_IAM`), folded to the part of it
   that its holder does not choose (`iam_caller`).
3. Else the digest of the one key forwarded upstream (`passthrough`).
"""

from __future__ import annotations

import re

from ..errors import GatewayError
from .authenticator import Credentials

_PARTITION = r"(?P<partition>aws(?:-[a-z]+)*)"
_ACCOUNT = r"(?P<account>\d{12})"
_NAME = r"[\w+=,.@-]+"

# The principal ARNs a SigV4-signed caller can have. An IAM user's name and
# path, and the account, are the operator's; a role session's name and a
# federated user's name are its holder's, chosen on every AssumeRole or
# GetFederationToken call.
_FIXED = re.compile(rf"arn:{_PARTITION}:iam::{_ACCOUNT}:(?:root|user/(?:{_NAME}/)*{_NAME})", re.A)
_ROLE_SESSION = re.compile(
    rf"arn:{_PARTITION}:sts::{_ACCOUNT}:assumed-role/(?P<role>{_NAME})/{_NAME}", re.A
)
_FEDERATED_USER = re.compile(rf"arn:{_PARTITION}:sts::{_ACCOUNT}:federated-user/{_NAME}", re.A)


def iam_caller(principal: str) -> str:
    """A signed principal as budgeted, or a 403 for a form whose chosen part is unknown.

    An assumed-role session is its role (a session's ARN has no role path; a
    role's name is unique in its account). A federated user is its account's
    federated users, `arn:<partition>:sts::<account>:federated-user`, which no
    signed caller is named: one budget and one chain for every name.
    """
    if _FIXED.fullmatch(principal):
        return principal
    session = _ROLE_SESSION.fullmatch(principal)
    if session is not None:
        partition, account, role = session.group("partition", "account", "role")
        return f"arn:{partition}:iam::{account}:role/{role}"
    federated = _FEDERATED_USER.fullmatch(principal)
    if federated is not None:
        partition, account = federated.group("partition", "account")
        return f"arn:{partition}:sts::{account}:federated-user"
    raise GatewayError(
        403,
        "The gateway names callers by IAM user, role or account; this signed principal's"
        " form is none of them. Call as an IAM user or through a role.",
        "permission_error",
    )


def identify(credentials: Credentials, principal: str | None) -> tuple[str | None, tuple[str, ...]]:
    """The call's caller and groups, by the rule of precedence above."""
    if credentials.gateway_key or principal is None:
        return credentials.caller, credentials.caller_groups
    # Groups belong to gateway keys: a signed caller has none.
    return iam_caller(principal), ()
