"""The options every judging policy shares; a policy's own options type extends these."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..options import PolicyOptions
from .providers import PROVIDERS

DEFAULT_MODEL = "claude-haiku-4-5"


class JudgeOptions(PolicyOptions):
    provider: str = "anthropic"
    """Who runs the judge model: `anthropic` (the Messages API) or `bedrock`."""
    model: str = Field(default=DEFAULT_MODEL, min_length=1)
    base_url: str | None = None
    """Anthropic provider: the API's base; default the gateway's own UPSTREAM_BASE_URL, so
    the local simulator answers in a local run."""
    api_key_env: str = "ANTHROPIC_API_KEY"
    """Anthropic provider: the variable holding the judge's key; default the gateway's key."""
    timeout: float = Field(default=10.0, gt=0, le=300)
    """Seconds one judge call may take; never more than the Lambda's remaining time."""
    max_tokens: int = Field(default=512, ge=16, le=8192)
    context: Literal["block", "task"] = "block"
    """`block`: the block alone; `task`: with the user's own words (judge.task)."""
    context_bytes: int = Field(default=8192, ge=0, le=1024 * 1024)
    include_system: bool = False
    max_concurrent: int = Field(default=4, ge=1, le=64)
    """Judge calls of one answer in flight at once."""
    max_judged_blocks: int = Field(default=32, ge=0, le=10_000)
    """Blocks judged per answer; every further one is handled as a judge error."""
    memo_bytes: int = Field(default=1024 * 1024, ge=0)
    """Bytes of verdicts kept per policy instance, so a block already judged is not judged
    again; 0 turns the memo off."""
    on_error: Literal["block", "allow"] = "block"
    """What a judge error does to its block: `block` (fail-secure) or `allow`, with a note."""

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, name: str) -> str:
        if name not in PROVIDERS:
            raise ValueError(f"unknown judge provider; one of {', '.join(sorted(PROVIDERS))}")
        return name

    @field_validator("api_key_env")
    @classmethod
    def _not_the_lambdas_credentials(cls, name: str) -> str:
        # Whoever writes the policy config also chooses `base_url`, and the key
        # is sent there: it must never be one of the Lambda's own credentials.
        if name.upper().startswith(("AWS_", "_X_AMZN", "_HANDLER", "LAMBDA_")):
            raise ValueError("may not name one of the Lambda's own AWS variables")
        return name
