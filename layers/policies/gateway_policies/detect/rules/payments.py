"""Payments and commerce: Stripe, Square, Braintree, Shopify, Plaid, Flutterwave, EasyPost,
Shippo, Duffel."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import UUID, UUID_WIDTH, hex_run, token

_STRIPE_BODY = r"[A-Za-z0-9]{24,247}"


def _shopify(kind: str, prefix: str) -> Rule:
    return token(kind, prefix + "[a-fA-F0-9]{32}", 38, (prefix,))


RULES: tuple[Rule, ...] = (
    token(
        "stripe_secret_key", r"sk_(?:live|test)_" + _STRIPE_BODY, 8 + 247, ("sk_live_", "sk_test_")
    ),
    token(
        "stripe_restricted_key",
        r"rk_(?:live|test)_" + _STRIPE_BODY,
        8 + 247,
        ("rk_live_", "rk_test_"),
    ),
    token(
        "stripe_webhook_secret",
        r"whsec_[A-Za-z0-9+/]{32,64}",
        70,
        ("whsec_",),
        alphabet="A-Za-z0-9+/_-",
    ),
    token(
        "square_access_token",
        r"EAAA[A-Za-z0-9_-]{60}|sq0atp-[A-Za-z0-9_-]{22}",
        64,
        ("eaaa", "sq0atp-"),
    ),
    token("square_oauth_secret", r"sq0csp-[A-Za-z0-9_-]{43}", 50, ("sq0csp-",)),
    token(
        "braintree_access_token",
        r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$" + hex_run(32),
        13 + 11 + 17 + 32,
        ("access_token$",),
        alphabet="A-Za-z0-9_$-",
    ),
    _shopify("shopify_access_token", "shpat_"),
    _shopify("shopify_custom_app_token", "shpca_"),
    _shopify("shopify_private_app_token", "shppa_"),
    _shopify("shopify_shared_secret", "shpss_"),
    token(
        "plaid_access_token",
        r"access-(?:sandbox|development|production)-" + UUID,
        19 + UUID_WIDTH,
        ("access-sandbox-", "access-development-", "access-production-"),
    ),
    token(
        "flutterwave_secret_key",
        r"FLWSECK(?:_TEST)?-" + hex_run(32) + "-X",
        15 + 32 + 2,
        ("flwseck",),
    ),
    token("easypost_api_key", r"EZ[AT]K" + "[a-zA-Z0-9]{54}", 58, ("ezak", "eztk")),
    token("shippo_api_token", r"shippo_(?:live|test)_" + hex_run(40), 52, ("shippo_",)),
    token(
        "duffel_api_token",
        r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
        55,
        ("duffel_",),
        alphabet="A-Za-z0-9_=-",
    ),
)
