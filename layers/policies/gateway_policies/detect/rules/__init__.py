"""The rule catalogue: every category module's `RULES`, in order.

Order matters where two kinds find the same text: the earlier one names it
(`Bearer sk-ant-…` is an `anthropic_api_key`), so specific families come before
generic ones.
"""

from __future__ import annotations

from ..rule import Rule
from . import core

RULES: tuple[Rule, ...] = (*core.RULES,)
