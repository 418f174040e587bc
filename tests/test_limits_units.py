"""Issue 42's parts on their own: the document's limits, the price table, the estimate, the
windows, and the overshoot bound of leases shared by many environments."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from gateway_policies import PolicyConfigError, load_document
from policy_gateway.limits import config
from policy_gateway.limits.estimate import IMAGE_TOKENS, estimate
from policy_gateway.limits.ledger import LEASE_DIVISOR, REQUESTS, Ledger
from policy_gateway.limits.prices import shipped_prices
from policy_gateway.limits.store import InProcessStore
from policy_gateway.limits.windows import DAY, MINUTE, MONTH, window

pytestmark = pytest.mark.unit


def parsed(**document: Any) -> config.LimitsConfig:
    return config.parse(json.dumps({"policies": [], **document}))


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"limits": {"requests_per_minute": 0}}, "limits.requests_per_minute must be a whole"),
        ({"limits": {"requests_per_minute": "60"}}, "got '60'"),
        ({"limits": {"requests_per_minute": True}}, "got True"),
        ({"limits": {"spend_per_day_usd": -1}}, "limits.spend_per_day_usd must be a positive"),
        ({"limits": {"spend_per_day_usd": float("inf")}}, "spend_per_day_usd must be a positive"),
        ({"limits": {"rpm": 60}}, "limits has unknown limits ['rpm']"),
        ({"limits": [60]}, "limits must be an object of limits"),
        (
            {"callers": {"bob": {"policies": [], "limits": {"tokens_per_day": 1.5}}}},
            "callers['bob'].limits.tokens_per_day must be a whole number",
        ),
        ({"limits_on_error": "ignore"}, "limits_on_error must be 'allow' or 'refuse'"),
        ({"prices": {"m": {"input": 1}}}, "prices['m'] needs 'input' and 'output'"),
        ({"prices": {"m": {"input": 1, "output": -2}}}, "prices['m'].output must be a number"),
        ({"prices": {"m": {"input": 1, "output": 2, "batch": 1}}}, "unknown keys ['batch']"),
    ],
)
def test_a_bad_value_refuses_the_document_naming_it(document: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyConfigError) as refused:
        parsed(**document)
    assert message in str(refused.value)


def test_limits_resolve_as_chains_do_and_the_loader_lets_them_through() -> None:
    text = json.dumps(
        {
            "policies": [],
            "limits": {"requests_per_minute": 60},
            "callers": {
                "alice": {"policies": [], "limits": {"requests_per_minute": 600}},
                "bob": {"policies": []},
                "group:contractors": {"policies": [], "limits": {"spend_per_day_usd": 5}},
                "group:interns": {"policies": [], "limits": {"spend_per_day_usd": 1}},
            },
        }
    )
    assert load_document(text).resolve("alice").name == "alice"
    limits = config.parse(text)
    assert limits.resolve("alice", ["contractors"]).values == {"requests_per_minute": 600}
    assert limits.resolve("carol", ["staff", "interns", "contractors"]).values == {
        "spend_per_day_usd": 1.0
    }
    # bob has a chain of his own but no limits of his own: the default's.
    assert limits.resolve("bob").values == {"requests_per_minute": 60}
    assert limits.resolve(None).values == {"requests_per_minute": 60}
    assert not parsed()


def test_prices_by_family_bedrock_ids_unknown_models_at_the_highest_and_overrides() -> None:
    table = shipped_prices()
    assert table.date
    assert table.source.startswith("https://")
    sonnet, known = table.price("claude-sonnet-4-5-20250929")
    assert known
    assert sonnet == table.price("claude-sonnet-4-5")[0]
    assert table.price("us.anthropic.claude-sonnet-4-5-20250929-v1:0") == (sonnet, True)
    unknown, known = table.price("claude-nonesuch-9")
    assert not known
    assert unknown == table.highest
    assert unknown.output >= max(price.output for price in table.models.values())
    counts = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert sonnet.cost(counts) == pytest.approx(3 + 15)
    overridden = parsed(prices={"claude-nonesuch-9": {"input": 1, "output": 2}}).prices
    price, known = overridden.price("claude-nonesuch-9")
    assert known
    assert price.cost(counts) == pytest.approx(3)
    # The API's own ratios for what the override leaves out.
    assert price.cache_creation * 1_000_000 == pytest.approx(1.25)
    assert price.cache_read * 1_000_000 == pytest.approx(0.1)


def test_the_estimate_is_the_body_over_three_max_tokens_and_an_image_at_its_most() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * 300_000},
    }
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, image]}],
    }
    size = len(json.dumps(request))
    guess = estimate(size, request)
    assert guess.output_tokens == 1024
    assert guess.input_tokens == -(-(size - 300_000) // 3) + IMAGE_TOKENS
    assert estimate(10, {"max_tokens": "many"}).output_tokens == 0


def test_windows_are_utc_minutes_days_and_months() -> None:
    now = 1798761599.5  # 2026-12-31T23:59:59.5Z
    assert window(MINUTE, now).reset_iso() == "2027-01-01T00:00:00Z"
    assert window(MINUTE, now).seconds_left(now) == 1
    assert window(DAY, now).name == "day:2026-12-31"
    assert window(MONTH, now).name == "month:2026-12"
    assert window(MONTH, now).reset_iso() == "2027-01-01T00:00:00Z"


def test_a_hundred_environments_overshoot_a_limit_by_at_most_their_leases() -> None:
    """Each environment counts one lease the others have not seen: the bound
    environments x lease = 100 x limit / 1,250 = 8% of the limit."""
    limit = 125_000
    lease = limit // LEASE_DIVISOR
    store = InProcessStore()
    ledgers = [Ledger(store) for _ in range(100)]
    current = window(MINUTE, 1796551210.0)
    ceilings = {REQUESTS: limit}

    async def run() -> int:
        admitted = 0
        open_ledgers = list(ledgers)
        while open_ledgers:
            for ledger in list(open_ledgers):
                slot = ledger.slot("caller", current)
                need = {REQUESTS: 1}
                if slot.refused_here(need, ceilings):
                    open_ledgers.remove(ledger)
                elif slot.fits(need, ceilings):
                    slot.count(need)
                    admitted += 1
                elif await ledger.ask("caller", slot, need, ceilings) is None:
                    admitted += 1
                else:
                    open_ledgers.remove(ledger)
        return admitted

    admitted = asyncio.run(run())
    assert limit <= admitted <= limit + 100 * lease
    assert admitted - limit <= 0.1 * limit
