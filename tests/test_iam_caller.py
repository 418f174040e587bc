"""A signed IAM principal as a caller: folded to what its holder does not choose, or refused.

Issue 31, item 4: a federated user's name, like a role session's, is its holder's
pick on every call; only `userArn`, which Lambda verified, is read. The same
rules through the real gateway: test_caller_naming.py.
"""

from __future__ import annotations

import json

import pytest
from policy_gateway.auth.authenticator import Credentials
from policy_gateway.auth.caller import iam_caller, identify
from policy_gateway.errors import GatewayError
from policy_gateway.lambda_context import from_headers

pytestmark = pytest.mark.unit

ACCOUNT = "123456789012"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/agents"
FEDERATED = f"arn:aws:sts::{ACCOUNT}:federated-user"


@pytest.mark.parametrize(
    ("principal", "caller"),
    [
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/agents/run-1", ROLE_ARN),
        (
            f"arn:aws-us-gov:sts::{ACCOUNT}:assumed-role/a.b@c/s=1,2",
            f"arn:aws-us-gov:iam::{ACCOUNT}:role/a.b@c",
        ),
        (
            f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSServiceRoleForX/fn",
            f"arn:aws:iam::{ACCOUNT}:role/AWSServiceRoleForX",
        ),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/alice", FEDERATED),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/a=b,c.d@e-f+g", FEDERATED),
        (
            f"arn:aws-cn:sts::{ACCOUNT}:federated-user/bob",
            f"arn:aws-cn:sts::{ACCOUNT}:federated-user",
        ),
        (
            f"arn:aws-iso-b:sts::{ACCOUNT}:federated-user/bob",
            f"arn:aws-iso-b:sts::{ACCOUNT}:federated-user",
        ),
        (f"arn:aws:iam::{ACCOUNT}:user/alice", f"arn:aws:iam::{ACCOUNT}:user/alice"),
        (
            f"arn:aws:iam::{ACCOUNT}:user/division/team/alice",
            f"arn:aws:iam::{ACCOUNT}:user/division/team/alice",
        ),
        (f"arn:aws:iam::{ACCOUNT}:root", f"arn:aws:iam::{ACCOUNT}:root"),
        (f"arn:aws-cn:iam::{ACCOUNT}:root", f"arn:aws-cn:iam::{ACCOUNT}:root"),
    ],
)
def test_a_signed_principal_is_budgeted_by_what_its_holder_does_not_choose(
    principal: str, caller: str
) -> None:
    assert iam_caller(principal) == caller


@pytest.mark.parametrize(
    "principal",
    [
        # Forms no signed caller has today, each with a part its holder could pick:
        # refused rather than taken whole.
        f"arn:aws:sts::{ACCOUNT}:assumed-role/service-role/agents/run-1",
        f"arn:aws:sts::{ACCOUNT}:assumed-role/agents",
        f"arn:aws:sts::{ACCOUNT}:federated-user",
        f"arn:aws:sts::{ACCOUNT}:federated-user/a/b",
        f"arn:aws:iam::{ACCOUNT}:role/agents",
        f"arn:aws:iam::{ACCOUNT}:role/service-role/agents",
        f"arn:aws:sts::{ACCOUNT}:root",
        f"arn:aws:iam::{ACCOUNT}:user/",
        f"arn:aws:iam::{ACCOUNT}:root/x",
        f"arn:aws:iam::{ACCOUNT}:user/alice\n",
        f"arn:aws:sts::{ACCOUNT}:assumed-role/agents/run-1 ",
        f"arn:aws:sts::{ACCOUNT}:assumed-role/agents/r\u00fcn",
        "arn:aws:sts::1234:federated-user/alice",
        f"arn:other:sts::{ACCOUNT}:federated-user/alice",
        f"{ACCOUNT}:alice",
        "AIDAEXAMPLE:alice",
        "*",
        "",
    ],
)
def test_a_principal_of_no_known_form_is_refused(principal: str) -> None:
    with pytest.raises(GatewayError) as refused:
        iam_caller(principal)
    assert (refused.value.status, refused.value.error_type) == (403, "permission_error")


def test_only_the_user_arn_names_a_signed_caller() -> None:
    """`userId` (`<account>:<name>` for a federated user) and `callerId` are never read."""
    iam = {"userId": f"{ACCOUNT}:alice", "callerId": f"{ACCOUNT}:alice", "accountId": ACCOUNT}
    context = json.dumps({"authorizer": {"iam": iam}})
    assert from_headers(None, context).iam_principal is None


def test_a_gateway_key_outranks_a_signed_principal_and_a_signed_principal_a_forwarded_key() -> None:
    """The one rule of precedence (docs/policies.md, "Who the caller is"), for chain and budget."""
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/agents/run-1"
    key = Credentials([], (), "alice", ("contractors",), gateway_key=True)
    forwarded = Credentials(None, (), "key:0123456789abcdef")
    assert identify(key, session) == ("alice", ("contractors",))
    assert identify(key, None) == ("alice", ("contractors",))
    assert identify(forwarded, session) == (ROLE_ARN, ())
    assert identify(forwarded, None) == ("key:0123456789abcdef", ())
    assert identify(Credentials(None, ()), None) == (None, ())
