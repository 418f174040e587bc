"""The Messages API's rate-limit headers on every answer under limits, and the 429's message.

`anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}`
for each per-minute limit the caller has (remaining after this call, as the API
counts it; reset as RFC 3339), replacing the upstream's own, which describe the
gateway's organisation rather than the caller. A refusal adds `retry-after`:
whole seconds until the refusing window ends, which the official SDKs and Claude
Code wait before retrying (they wait at most about a minute, so a daily budget's
refusal is final for them, as it should be).
"""

from __future__ import annotations

from starlette.types import Message

from ..call import Call, merge_headers
from . import config
from .admission import CallLimits
from .ledger import INPUT_TOKENS, OUTPUT_TOKENS, REQUESTS
from .windows import MINUTE, Window

FAMILIES = (
    ("requests", config.REQUESTS_PER_MINUTE, REQUESTS),
    ("input-tokens", config.INPUT_TOKENS_PER_MINUTE, INPUT_TOKENS),
    ("output-tokens", config.OUTPUT_TOKENS_PER_MINUTE, OUTPUT_TOKENS),
)
PREFIX = "anthropic-ratelimit-"
RETRY_AFTER = "retry-after"


def ratelimit_headers(state: CallLimits) -> list[tuple[bytes, bytes]]:
    slot = state.slots.get(MINUTE)
    found: list[tuple[bytes, bytes]] = []
    if slot is not None:
        for family, name, counter in FAMILIES:
            limit = state.limits.get(name)
            if limit is None:
                continue
            remaining = max(0, int(limit) - slot.used(counter))
            found += [
                (f"{PREFIX}{family}-limit".encode(), str(int(limit)).encode()),
                (f"{PREFIX}{family}-remaining".encode(), str(remaining).encode()),
                (f"{PREFIX}{family}-reset".encode(), slot.window.reset_iso().encode()),
            ]
    if state.refused is not None:
        _, window = state.refused
        found.append((RETRY_AFTER.encode(), str(window.seconds_left(state.now)).encode()))
    return found


def stamp(call: Call, state: CallLimits) -> None:
    """Give every answer of the call, whatever route or error it is, the caller's headers."""
    send = call.send

    async def stamped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {
                **message,
                "headers": merge_headers(
                    list(message.get("headers", [])), ratelimit_headers(state)
                ),
            }
        await send(message)

    call.send = stamped


def refusal_message(state: CallLimits, name: str, window: Window) -> str:
    limit = state.limits.get(name)
    shown = f"${limit:,.2f}" if name in config.SPEND_LIMITS else f"{int(limit or 0):,}"
    what = "budget" if name in config.SPEND_LIMITS or window.kind != MINUTE else "limit"
    return (
        f"Caller {state.caller!r} reached its {name} {what} of {shown}; "
        f"it resets at {window.reset_iso()}."
    )
