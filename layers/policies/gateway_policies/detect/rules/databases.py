"""Hosted databases: PlanetScale, Supabase, ClickHouse Cloud (a password in a connection URL is
`url_password`, in `generic`)."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import hex_run, token

RULES: tuple[Rule, ...] = (
    token(
        "planetscale_token",
        r"pscale_tkn_[A-Za-z0-9_.-]{43}",
        54,
        ("pscale_tkn_",),
        alphabet="A-Za-z0-9_.-",
    ),
    token(
        "planetscale_password",
        r"pscale_pw_[A-Za-z0-9_.-]{43}",
        53,
        ("pscale_pw_",),
        alphabet="A-Za-z0-9_.-",
    ),
    token(
        "planetscale_oauth_token",
        r"pscale_oauth_[A-Za-z0-9_.-]{32,64}",
        77,
        ("pscale_oauth_",),
        alphabet="A-Za-z0-9_.-",
    ),
    token("supabase_access_token", r"sbp_" + hex_run(40), 44, ("sbp_",)),
    token("supabase_secret_key", r"sb_secret_[A-Za-z0-9_-]{31,64}", 74, ("sb_secret_",)),
    token("clickhouse_cloud_api_secret", r"4b1d[A-Za-z0-9]{38}", 42, ("4b1d",)),
)
