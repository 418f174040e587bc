"""The rule catalogue: every category module's `RULES`, in order.

Order matters where two kinds find the same text: the earlier one names it
(`Bearer sk-ant-…` is an `anthropic_api_key`), so the core kinds come first, specific
families before generic ones (`generic`), and the opt-in personal data (`pii`) last.
"""

from __future__ import annotations

from ..rule import Rule
from . import ai, cloud, core, databases, devtools, generic, keys, messaging, payments, pii, vcs

RULES: tuple[Rule, ...] = (
    *core.RULES,
    *ai.RULES,
    *vcs.RULES,
    *cloud.RULES,
    *messaging.RULES,
    *payments.RULES,
    *devtools.RULES,
    *databases.RULES,
    *keys.RULES,
    *generic.RULES,
    *pii.RULES,
)
