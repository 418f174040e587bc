"""The policy document's limits: per caller, per group and a default, as chains are resolved.

`"limits": {"requests_per_minute": 60, ...}` at the top level (the default) and inside
any `"callers"` entry beside its `"policies"`; a top-level `"prices"` overriding the
shipped table and `"limits_on_error"` (`allow`, the default, or `refuse`). A call's
limits are its exact caller's, else its first group's that has some, else the default
(the chains' order, runtime/document.py). A bad value raises PolicyConfigError, which
refuses the whole document as a bad chain does, so the last good one keeps serving.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway_policies import PolicyConfigError
from gateway_policies.runtime.document import GROUP_PREFIX, read_per_caller, resolve_for

from .prices import ModelPrice, PriceTable, shipped_prices

KEY_LIMITS = "limits"
KEY_PRICES = "prices"
KEY_ON_ERROR = "limits_on_error"
ON_ERROR_ALLOW = "allow"
ON_ERROR_REFUSE = "refuse"

# Each limit's name in the document, as the 429's message and `usage --caller` name it.
REQUESTS_PER_MINUTE = "requests_per_minute"
INPUT_TOKENS_PER_MINUTE = "input_tokens_per_minute"
OUTPUT_TOKENS_PER_MINUTE = "output_tokens_per_minute"
TOKENS_PER_DAY = "tokens_per_day"
SPEND_PER_DAY_USD = "spend_per_day_usd"
SPEND_PER_MONTH_USD = "spend_per_month_usd"
LIMIT_NAMES = (
    REQUESTS_PER_MINUTE,
    INPUT_TOKENS_PER_MINUTE,
    OUTPUT_TOKENS_PER_MINUTE,
    TOKENS_PER_DAY,
    SPEND_PER_DAY_USD,
    SPEND_PER_MONTH_USD,
)
SPEND_LIMITS = frozenset({SPEND_PER_DAY_USD, SPEND_PER_MONTH_USD})
PRICE_FIELDS = ("input", "output", "cache_creation", "cache_read")


@dataclass(frozen=True)
class Limits:
    """One caller's limits: each None when the document sets none."""

    values: Mapping[str, float] = field(default_factory=dict)
    """By limit name; counts are whole numbers, spends dollars."""

    def __bool__(self) -> bool:
        return bool(self.values)

    def get(self, name: str) -> float | None:
        return self.values.get(name)


NO_LIMITS = Limits()


@dataclass(frozen=True)
class LimitsConfig:
    """Every set of limits one document configures; `resolve` picks a call's."""

    default: Limits = NO_LIMITS
    callers: Mapping[str, Limits] = field(default_factory=dict)
    groups: Mapping[str, Limits] = field(default_factory=dict)
    prices: PriceTable = field(default_factory=shipped_prices)
    on_error: str = ON_ERROR_ALLOW

    def __bool__(self) -> bool:
        return bool(self.default or self.callers or self.groups)

    def resolve(self, caller: str | None, groups: Sequence[str] = ()) -> Limits:
        """The limits for `caller`: its own, else its first group's with some, else the
        default."""
        return resolve_for(caller, groups, self.callers, self.groups, self.default)


NO_LIMITS_CONFIG = LimitsConfig()


def load_fields(limits: LimitsConfig, store: str) -> dict[str, Any]:
    """What the `policy chain loaded` line says of the limits: who has some, where they
    count (`process`: each environment on its own, no LIMITS_TABLE)."""
    if not limits:
        return {}
    return {
        "limits": {
            "default": bool(limits.default),
            "callers": [*limits.callers, *(GROUP_PREFIX + group for group in limits.groups)],
            "counted_in": store,
            "prices": limits.prices.date,
            KEY_ON_ERROR: limits.on_error,
        }
    }


def parse(text: str | bytes) -> LimitsConfig:
    """The limits of a policy document's text; PolicyConfigError names the bad value."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise PolicyConfigError(f"policy config is not valid JSON: {exc}") from exc
    if not isinstance(document, Mapping):
        raise PolicyConfigError('policy config must be an object {"policies": [...]}')
    default = _limits(document.get(KEY_LIMITS), KEY_LIMITS)
    callers, groups = read_per_caller(document, KEY_LIMITS, _limits)
    on_error = document.get(KEY_ON_ERROR, ON_ERROR_ALLOW)
    if on_error not in (ON_ERROR_ALLOW, ON_ERROR_REFUSE):
        raise PolicyConfigError(
            f"{KEY_ON_ERROR} must be {ON_ERROR_ALLOW!r} or {ON_ERROR_REFUSE!r}, got {on_error!r}"
        )
    prices = shipped_prices()
    if KEY_PRICES in document:
        prices = prices.overridden(_prices(document[KEY_PRICES]))
    return LimitsConfig(default, callers, groups, prices, on_error)


def _limits(raw: Any, where: str) -> Limits:
    if raw is None:
        return NO_LIMITS
    if not isinstance(raw, Mapping):
        raise PolicyConfigError(f"{where} must be an object of limits ({', '.join(LIMIT_NAMES)})")
    unknown = sorted(set(raw) - set(LIMIT_NAMES))
    if unknown:
        raise PolicyConfigError(
            f"{where} has unknown limits {unknown}: use {', '.join(LIMIT_NAMES)}"
        )
    values: dict[str, float] = {}
    for name, value in raw.items():
        if name in SPEND_LIMITS:
            values[name] = _positive_number(value, f"{where}.{name}")
        else:
            values[name] = _positive_count(value, f"{where}.{name}")
    return Limits(values)


def _positive_count(value: Any, where: str) -> int:
    if type(value) is not int or value < 1:
        raise PolicyConfigError(f"{where} must be a whole number of at least 1, got {value!r}")
    return value


def _positive_number(value: Any, where: str) -> float:
    # A bool is an int to Python, never an amount of dollars to an operator.
    if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
        raise PolicyConfigError(f"{where} must be a positive number of dollars, got {value!r}")
    return float(value)


def _prices(raw: Any) -> dict[str, ModelPrice]:
    if not isinstance(raw, Mapping):
        raise PolicyConfigError(
            f'{KEY_PRICES} must be an object {{"<model>": {{"input": ..., "output": ...}}}}'
            " in dollars per million tokens"
        )
    prices: dict[str, ModelPrice] = {}
    for model, entry in raw.items():
        where = f"{KEY_PRICES}[{model!r}]"
        if not model.strip():
            raise PolicyConfigError(f"{where}: a model name must not be empty")
        if not isinstance(entry, Mapping) or not {"input", "output"} <= set(entry):
            raise PolicyConfigError(f"{where} needs 'input' and 'output' (dollars per million)")
        unknown = sorted(set(entry) - set(PRICE_FIELDS))
        if unknown:
            raise PolicyConfigError(f"{where} has unknown keys {unknown}")
        amounts = {}
        for name, value in entry.items():
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise PolicyConfigError(f"{where}.{name} must be a number of 0 or more")
            amounts[name] = float(value)
        prices[model] = ModelPrice.from_per_million(amounts)
    return prices
