"""The base of a policy's options, kept apart so pydantic loads only with a policy that has some."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PolicyOptions(BaseModel):
    """Base of a policy's options: the `options` object of its chain JSON entry.

    Unknown keys are refused, so a typo in the chain JSON is a config error,
    never a silently ignored setting.
    """

    model_config = ConfigDict(extra="forbid")
