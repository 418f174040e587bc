"""What a call costs: the shipped price table (prices.json, with its date and source) and the
document's `prices` over it.

A model is priced by the longest listed name it starts with, so a dated id
(`claude-sonnet-4-5-20250929`) or a newer minor version of a family costs its
family's price; Bedrock's ids (`us.anthropic.claude-...-v1:0`) are read without
their region and vendor prefix. A model no entry matches costs the highest
listed price of each kind and is reported as unpriced (the call line's
`usage_priced: false`), so an unknown model can never spend a budget cheaply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

PER_MILLION = 1_000_000
# The API's own multipliers for a price the table does not list: a 5-minute cache write
# costs 1.25x the input price, a cache read 0.1x.
CACHE_CREATION_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1
BEDROCK_VENDOR = "anthropic."


@dataclass(frozen=True)
class ModelPrice:
    """Dollars per token of each kind the API's `usage` reports."""

    input: float
    output: float
    cache_creation: float
    cache_read: float

    @classmethod
    def from_per_million(cls, amounts: Mapping[str, float]) -> ModelPrice:
        unit = amounts["input"]
        return cls(
            input=unit / PER_MILLION,
            output=amounts["output"] / PER_MILLION,
            cache_creation=amounts.get("cache_creation", unit * CACHE_CREATION_FACTOR)
            / PER_MILLION,
            cache_read=amounts.get("cache_read", unit * CACHE_READ_FACTOR) / PER_MILLION,
        )

    def cost(self, counts: Mapping[str, int]) -> float:
        return (
            counts.get("input_tokens", 0) * self.input
            + counts.get("output_tokens", 0) * self.output
            + counts.get("cache_creation_input_tokens", 0) * self.cache_creation
            + counts.get("cache_read_input_tokens", 0) * self.cache_read
        )


@dataclass(frozen=True)
class PriceTable:
    models: Mapping[str, ModelPrice]
    date: str
    source: str
    batch_discount: float

    def price(self, model: str) -> tuple[ModelPrice, bool]:
        """The model's price and whether the table lists it (else the highest of each kind)."""
        name = model.rpartition(BEDROCK_VENDOR)[2] if BEDROCK_VENDOR in model else model
        match = max(
            (listed for listed in self.models if name.startswith(listed)), key=len, default=None
        )
        if match is not None:
            return self.models[match], True
        return self.highest, False

    @property
    def highest(self) -> ModelPrice:
        prices = self.models.values()
        return ModelPrice(
            input=max(price.input for price in prices),
            output=max(price.output for price in prices),
            cache_creation=max(price.cache_creation for price in prices),
            cache_read=max(price.cache_read for price in prices),
        )

    def overridden(self, prices: Mapping[str, ModelPrice]) -> PriceTable:
        """The table with the document's own prices over the shipped ones."""
        return PriceTable(
            {**self.models, **prices}, f"{self.date} + document", self.source, self.batch_discount
        )


@cache
def shipped_prices() -> PriceTable:
    data = json.loads(resources.files(__package__).joinpath("prices.json").read_text())
    return PriceTable(
        {model: ModelPrice.from_per_million(entry) for model, entry in data["models"].items()},
        data["date"],
        data["source"],
        float(data["batch_discount"]),
    )
