"""The retry ladder's rungs after an upstream error: a policy's repair, then the fallback's request.

Both work on fresh parses (of what was sent, of the original), never on the
documents a call already holds, so a hook that fails half-way leaves nothing
half-changed behind. Both run on the worker loop, like the request hooks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway_policies import JSONObject, PolicyFailure, PolicyViolation, UpstreamErrorInfo
from gateway_policies.runtime.diff import changed_locations

from .. import names
from ..observability.logs import logger
from ..upstream.errors import UpstreamStatusError
from .prepared import PreparedRequest
from .repair import structural
from .repair_record import RULE_POLICY_HOOK, Repair


@dataclass(frozen=True)
class Repaired:
    """What the repair rung sends, and the repairs that made it."""

    request: JSONObject
    repairs: list[Repair]


@dataclass(frozen=True)
class FallbackRequest:
    """What the fallback rung sends, and whose changes it drops and keeps."""

    body: bytes
    scope: str
    bypassed: list[str]
    kept: list[str]
    repairs: list[Repair]
    """Structural repairs of the narrow request (a kept policy's change breaking a rule)."""


async def policy_repair(error: UpstreamStatusError, prepared: PreparedRequest) -> Repaired | None:
    """The request as sent, repaired by the policies' own hooks; None when none changed it.

    A hook that fails repairs nothing: the upstream's error stands, and the
    failure is logged (the policy's name and the exception's type only).
    """
    request = json.loads(prepared.sent)
    info = UpstreamErrorInfo(error.status, error.error_type, error.error_message)
    try:
        policies = await prepared.chain.repair(request, info, prepared.ctx)
    except (PolicyFailure, PolicyViolation) as exc:
        logger.error(
            "policy repair hook failed; no repair",
            extra={"policy": exc.policy, "error_type": type(exc).__name__},
        )
        return None
    if not policies or request == prepared.modified:
        return None
    locations = changed_locations(prepared.modified, request)
    return Repaired(request, [Repair.at(p.label, RULE_POLICY_HOOK, locations) for p in policies])


async def fallback_request(prepared: PreparedRequest) -> FallbackRequest | None:
    """The original (`full`), or with the non-bypassable policies re-applied (`narrow`).

    None when that is what was already sent: nothing to fall back to.
    """
    chain = prepared.chain
    if not chain.kept:
        if not await prepared.differs():
            return None
        return FallbackRequest(
            prepared.original, names.FALLBACK_SCOPE_FULL, chain.bypassed, chain.kept, []
        )
    narrow = json.loads(prepared.original)
    try:
        await chain.apply_kept(narrow, prepared.ctx.replay())
        # A kept policy's change may break a rule as it did on the first
        # attempt, whose repair must hold for the fallback too.
        repairs = await structural(prepared.original, narrow, chain, prepared.ctx)
    except (PolicyFailure, PolicyViolation) as exc:
        # They passed on this very request moments ago; a hook that is not
        # deterministic must not be what a fallback sends.
        logger.error(
            "passthrough fallback not taken: a non-bypassable policy failed on the original",
            extra={"policy": exc.policy, "error_type": type(exc).__name__},
        )
        return None
    if narrow == prepared.modified:
        logger.info(
            "passthrough fallback not taken: every change came from non-bypassable policies",
            extra={"kept": chain.kept},
        )
        return None
    return FallbackRequest(
        prepared.dump(narrow), names.FALLBACK_SCOPE_NARROW, chain.bypassed, chain.kept, repairs
    )
