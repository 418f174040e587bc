"""A policy's refusal, or its failure, as the error the client gets: translated here only.

A refusal is recorded here, once, on the context the refusing chain ran with
(`refuse`, naming the policy), so it reaches the call's `policy_actions`.
"""

from __future__ import annotations

from gateway_policies import PolicyAction, PolicyContext, PolicyFailure, PolicyViolation

from .. import names
from ..errors import GatewayError
from ..observability import metrics
from ..observability.logs import logger


def policy_error(exc: PolicyViolation | PolicyFailure, ctx: PolicyContext) -> GatewayError:
    if isinstance(exc, PolicyViolation):
        metrics.count(names.METRIC_POLICY_REFUSALS)
        details = {"status": exc.status, "error_type": exc.error_type}
        ctx.actions.append(
            PolicyAction(exc.policy or "<chain>", "refuse", details, shadow=ctx.shadow)
        )
        return GatewayError(exc.status, exc.message, exc.error_type)
    if isinstance(exc.__cause__, RecursionError):
        # The policy walked a body nested deeper than Python's stack allows: the
        # input's fault, not the policy's.
        return GatewayError(400, "Request body is nested too deeply.")
    metrics.count(names.METRIC_POLICY_ERRORS)
    logger.error(
        "policy failed; refusing the call",
        extra={
            "policy": exc.policy,
            "hook": exc.hook,
            "error_type": type(exc.__cause__).__name__,
        },
    )
    return GatewayError(500, f"Policy {exc.policy!r} failed; the call was refused.", "api_error")
