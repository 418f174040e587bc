"""Developer platforms: package registries, CI, observability, productivity and identity
services, JWTs."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import UUID, UUID_WIDTH, hex_run, labelled, token
from ..validators import (
    base64_password,
    basic_credentials,
    docker_config,
    jwt_header,
    npm_checksum,
)

_B64URL = "[A-Za-z0-9_-]"
_BASIC = r"(?P<secret>[A-Za-z0-9+/]{6,400}={0,2})"
"""Base64 of `user:password`, as HTTP Basic carries it (validators.basic_credentials)."""
_BASIC_WIDTH = 402
_REGISTRY_AUTH_LONGEST = 8192
"""An ECR login (`AWS:` and a token of about 2,000 characters) with room to spare."""
_DOCKER_CONFIG_LONGEST = 32768
"""A `.dockerconfigjson` holding a few registries, ECR logins among them."""

RULES: tuple[Rule, ...] = (
    # npm's tokens carry GitHub's checksum: 30 random characters and their CRC32 in base62.
    token("npm_access_token", r"npm_[A-Za-z0-9]{36}", 40, ("npm_",), validator=npm_checksum),
    # .npmrc's legacy `_auth` (`//registry/:_auth=…`, or `npm_config__auth` in the environment):
    # base64 of `user:password`. `_authToken` is a token, not this: the `=` must follow `_auth`.
    Rule(
        kind="npm_legacy_auth",
        pattern=(
            r"(?:^|[^A-Za-z0-9])_auth[ \t]{0,4}=[ \t]{0,4}\\?[\"']?"
            + _BASIC
            + r"(?:[^A-Za-z0-9+/=]|$)"
        ),
        max_length=1 + 5 + 4 + 1 + 4 + 2 + _BASIC_WIDTH + 1,
        keywords=("_auth",),
        validator=basic_credentials,
        ignore_case=True,
    ),
    # A PyPI token is a macaroon whose base64 begins with the encoded "pypi.org" location; its
    # caveats (project names, expiry) make it longer, and a token past the bound would be missed
    # whole, so the bound is wide.
    token(
        "pypi_api_token",
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{70,1000}",
        20 + 1000,
        ("pypi-ageichlwas5vcmc",),
    ),
    token(
        "pypi_test_api_token",
        r"pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9_-]{70,1000}",
        27 + 1000,
        ("pypi-agendgvzdc5wexbplm9yzw",),
    ),
    token("rubygems_api_key", r"rubygems_" + hex_run(48), 57, ("rubygems_",)),
    token("clojars_api_token", r"CLOJARS_[a-z0-9]{60}", 68, ("clojars_",)),
    token("nuget_api_key", r"oy2[a-z0-9]{43}", 46, ("oy2",)),
    token(
        "docker_hub_token", r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,32}", 41, ("dckr_pat_", "dckr_oat_")
    ),
    # A registry's entry in Docker's client config (`~/.docker/config.json`, and Podman's
    # `auth.json`, a `DOCKER_AUTH_CONFIG`, a `.dockerconfigjson`): `"auth"`, base64 of
    # `user:password`, in JSON that may be pretty-printed or escaped inside another string, or
    # a Python dict's repr (`{'auth': '…'}`). An ECR login's runs to thousands of characters:
    # the match starts at its keyword (`lead`), so the engine confirms it from there.
    Rule(
        kind="docker_config_auth",
        pattern=(
            r"\\?[\"']auth\\?[\"'][ \t]{0,4}:[ \t]{0,4}\\?[\"']"
            rf"(?P<secret>[A-Za-z0-9+/]{{6,{_REGISTRY_AUTH_LONGEST}}}={{0,2}})\\?[\"']"
        ),
        max_length=2 + 4 + 2 + 4 + 1 + 4 + 2 + _REGISTRY_AUTH_LONGEST + 2 + 2,
        keywords=('"auth', "'auth"),
        lead=1,
        validator=basic_credentials,
    ),
    # The whole config as base64 (a Kubernetes `.dockerconfigjson`, a CI variable): base64 of
    # `{"auths":` (kubectl's compact JSON), of `{\n\t"auths"` (docker's own file) or of
    # `{\n  "auths"` begins it, distinctive enough to need no boundary before it.
    Rule(
        kind="docker_config_base64",
        pattern=(
            r"(?P<secret>(?:eyJhdXRocyI6|ewoJImF1dGhz|ewogICJhdXRo)"
            rf"[A-Za-z0-9+/]{{16,{_DOCKER_CONFIG_LONGEST}}}={{0,2}})(?:[^A-Za-z0-9+/=]|$)"
        ),
        max_length=12 + _DOCKER_CONFIG_LONGEST + 2 + 1,
        keywords=("eyjhdxrocyi6", "ewojimf1dghz", "ewogicjhdxro"),
        lead=0,
        validator=docker_config,
    ),
    # .npmrc's `_password` (next to `username`): base64 of the password alone.
    Rule(
        kind="npm_legacy_password",
        pattern=(
            r"(?:^|[^A-Za-z0-9])_password[ \t]{0,4}=[ \t]{0,4}\\?[\"']?"
            r"(?P<secret>[A-Za-z0-9+/]{4,400}={0,2})(?:[^A-Za-z0-9+/=]|$)"
        ),
        max_length=1 + 9 + 4 + 1 + 4 + 2 + 402 + 1,
        keywords=("_password",),
        validator=base64_password,
        ignore_case=True,
    ),
    token("jfrog_api_key", r"AKCp[A-Za-z0-9]{69}", 73, ("akcp",)),
    token("jfrog_reference_token", r"cmVmdGtuOjAxOj[A-Za-z0-9]{50}", 64, ("cmvmdgtuojaxoj",)),
    token("postman_api_key", r"PMAK-" + hex_run(24) + "-" + hex_run(34), 64, ("pmak-",)),
    token("sonarqube_token", r"sq[apu]_" + hex_run(40), 44, ("sqa_", "sqp_", "squ_")),
    token("circleci_personal_token", r"CCIPAT_[A-Za-z0-9]{22}_" + hex_run(40), 70, ("ccipat_",)),
    token("buildkite_api_token", r"bkua_" + hex_run(40), 45, ("bkua_",)),
    token("prefect_api_key", r"pnu_[A-Za-z0-9]{36}", 40, ("pnu_",)),
    token("readme_api_key", r"rdme_[a-z0-9]{70}", 75, ("rdme_",)),
    token("launchdarkly_access_token", r"api-" + UUID, 4 + UUID_WIDTH, ("api-",)),
    # A server-side SDK key (a mobile key, `mob-`, and a client-side id are public).
    token("launchdarkly_sdk_key", r"sdk-" + UUID, 4 + UUID_WIDTH, ("sdk-",)),
    token("linear_api_key", r"lin_api_[A-Za-z0-9]{40}", 48, ("lin_api_",)),
    token(
        "airtable_personal_access_token",
        r"pat[A-Za-z0-9]{14}\." + hex_run(64),
        82,
        ("pat",),
        alphabet="A-Za-z0-9_.-",
    ),
    token(
        "typeform_api_token", r"tfp_[A-Za-z0-9_=.-]{59}", 63, ("tfp_",), alphabet="A-Za-z0-9_=.-"
    ),
    token("figma_access_token", r"figd_[A-Za-z0-9_-]{40}", 45, ("figd_",)),
    token("contentful_access_token", r"CFPAT-[A-Za-z0-9_-]{43}", 49, ("cfpat-",)),
    token("hubspot_private_app_token", r"pat-(?:na|eu|ap)[0-9]-" + UUID, 8 + UUID_WIDTH, ("pat-",)),
    token("notion_integration_token", r"ntn_[0-9]{11}[A-Za-z0-9]{35}", 50, ("ntn_",)),
    # Before September 2024 an internal integration's token was `secret_` and 43 base62.
    token("notion_integration_token", r"secret_[A-Za-z0-9]{43}", 50, ("secret_",)),
    token(
        "asana_personal_access_token",
        r"[0-9]/[0-9]{10,20}(?:/[0-9]{10,20})?:[a-zA-Z0-9]{32}",
        1 + 21 + 21 + 33,
        (),
        alphabet="A-Za-z0-9/:",
    ),
    token(
        "mapbox_secret_token",
        r"sk\.eyJ[A-Za-z0-9_-]{56,100}\.[A-Za-z0-9_-]{22}",
        6 + 100 + 23,
        ("sk.eyj",),
        alphabet="A-Za-z0-9_.-",
    ),
    token(
        "onepassword_service_account_token",
        r"ops_eyJ[A-Za-z0-9+/]{250,1200}={0,2}",
        1209,
        ("ops_eyj",),
        alphabet="A-Za-z0-9+/=_",
    ),
    token(
        "onepassword_secret_key",
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        3 + 7 + 12 + 18,
        ("a3-",),
    ),
    token("databricks_token", r"dapi" + hex_run(32) + r"(?:-[0-9])?", 38, ("dapi",)),
    labelled("okta_api_token", r"okta[a-z_]{0,8}token", 17, r"00[a-z0-9_-]{40}", 42, ("okta",)),
    token(
        "dynatrace_api_token",
        r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
        96,
        ("dt0c01.",),
        alphabet="A-Za-z0-9_.-",
    ),
    token("newrelic_user_api_key", r"NRAK-[A-Z0-9]{27}", 32, ("nrak-",)),
    token("newrelic_insert_key", r"NRII-[A-Za-z0-9_-]{32}", 37, ("nrii-",)),
    labelled(
        "datadog_api_key", r"(?:datadog|dd)_?api_?key", 15, hex_run(32), 32, ("dd", "datadog")
    ),
    token(
        "grafana_cloud_api_token",
        r"glc_[A-Za-z0-9+/]{32,400}={0,2}",
        406,
        ("glc_",),
        alphabet="A-Za-z0-9+/=_",
    ),
    token("grafana_service_account_token", r"glsa_[A-Za-z0-9]{32}_" + hex_run(8), 46, ("glsa_",)),
    token(
        "sentry_org_token",
        r"sntrys_eyJ[A-Za-z0-9+/=_]{60,400}",
        410,
        ("sntrys_",),
        alphabet="A-Za-z0-9+/=_",
    ),
    token("sentry_user_token", r"sntryu_" + hex_run(64), 71, ("sntryu_",)),
    # A JWT: base64url JSON header and payload (both start `eyJ`, `{"`), and a signature.
    token(
        "jwt",
        rf"eyJ{_B64URL}{{8,1000}}\.eyJ{_B64URL}{{8,4000}}\.{_B64URL}{{16,1000}}",
        3 + 1000 + 4 + 4000 + 1 + 1000,
        ("eyj",),
        alphabet="A-Za-z0-9_.-",
        validator=jwt_header,
    ),
)
