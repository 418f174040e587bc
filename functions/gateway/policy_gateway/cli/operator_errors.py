"""What an operator command prints when it fails: one line, the problem and the next step.

The operator commands raise OperatorError for what they know (a parameter that
is not there, a stack without a function); everything else (boto's errors, a
missing file) is translated here, in one place, so no traceback ever reaches
the operator's terminal.
"""

from __future__ import annotations

NEEDS_A_STACK = (
    "--stack and doctor need a deployed stack: the stand-in serves only SSM, Secrets Manager "
    "and DynamoDB, which the commands reach without --stack"
)


class OperatorError(Exception):
    """A failure the operator can act on; `exit_code` 2 for input that was refused."""

    def __init__(self, problem: str, next_step: str, exit_code: int = 1) -> None:
        super().__init__(problem)
        self.problem = problem
        self.next_step = next_step
        self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.problem}; {self.next_step}"


def explain(exc: BaseException) -> OperatorError:
    """`exc` as an OperatorError: known failures with their fix, others by type and message."""
    if isinstance(exc, OperatorError):
        return exc
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )
    from botocore.parsers import ResponseParserError

    from .deployment import StackNotFound

    if isinstance(exc, StackNotFound) and exc.stand_in:
        return OperatorError(
            f"stack {exc} not found at {exc.stand_in}: that is make run's stand-in, which has "
            "no stacks",
            NEEDS_A_STACK,
        )
    if isinstance(exc, StackNotFound):
        return OperatorError(
            f"stack {exc} not found", "check --stack and --region (sam list stack-outputs)"
        )
    if isinstance(exc, NoCredentialsError):
        return OperatorError(
            "no AWS credentials found", "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(exc, NoRegionError):
        return OperatorError("no AWS region set", "pass --region or set AWS_REGION")
    if isinstance(exc, ResponseParserError):
        # Its message carries the whole body: an HTML page from an endpoint that is not
        # AWS's, such as `make run`'s stand-in asked for CloudFormation or Lambda.
        return OperatorError(
            "the AWS endpoint answered with something that is not an AWS response "
            "(is AWS_ENDPOINT_URL make run's stand-in?)",
            NEEDS_A_STACK,
        )
    if isinstance(exc, EndpointConnectionError):
        return OperatorError(str(exc), "check the region and any AWS_ENDPOINT_URL_* variable")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return OperatorError(
            f"AWS refused {exc.operation_name}: {error.get('Code')}: {error.get('Message')}",
            "check the credentials' permissions (docs/deploy.md lists what each command needs)",
        )
    if isinstance(exc, OSError) and exc.filename is not None:
        return OperatorError(f"cannot read {exc.filename}: {exc.strerror}", "check the path")
    return OperatorError(f"{type(exc).__name__}: {exc}", "see policy-gateway --help")
