"""The seven kinds redact_secrets has always had; their names are the `kinds` option's contract.

Each ends where its token ends (`\\b`, or a delimiter it consumes outside the
`secret` group), so the engine reports one end per token, not one per character.
"""

from __future__ import annotations

from ..rule import Rule
from ..shapes import URL_USERINFO as _USERINFO

PEM_BODY_LONGEST = 16384
"""Characters between a private key's BEGIN and END lines: a 8192-bit RSA key needs about 6,400."""

_PEM_LABEL = r"[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
# No "--" inside a body: the lazy body stops at the next dash run (an END line, or another
# key's BEGIN), so a crafted run of BEGIN lines costs `re` one pass, not one reach per line.
_PEM_BODY = rf"(?:[^-]|-[^-]){{0,{PEM_BODY_LONGEST // 2}}}"
_DIGIT = frozenset("0123456789")
# A top-level domain is letters (or an IDN's `xn--…`), never followed by a host's character: a
# locale's `sd_IN@devanagari.UTF-8` is no address.
_HOST = (
    r"[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,7}\.(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9\-]{1,59})"
)


def _has_digit(token: str) -> bool:
    """A bearer token, unlike "Bearer authentication", has a digit."""
    return not _DIGIT.isdisjoint(token)


def _not_in_url(match: str) -> bool:
    """An address, not a URL's `user:password@host` (which holds no address)."""
    return "://" not in match


RULES: tuple[Rule, ...] = (
    # A PEM or PGP private key, up to its END line; a key cut short (no END line) to the
    # end of the text, as long as the text ends within the key's reach.
    Rule(
        kind="private_key",
        pattern=(
            rf"(?P<secret>-----BEGIN {_PEM_LABEL}"
            rf"(?:{_PEM_BODY}?-----END {_PEM_LABEL}|{_PEM_BODY}$))"
        ),
        max_length=2 * (len("-----BEGIN ") + 40 + len("PRIVATE KEY BLOCK-----")) + PEM_BODY_LONGEST,
        keywords=("private key",),
    ),
    Rule(
        kind="anthropic_api_key",
        pattern=r"(?P<secret>sk-ant-[A-Za-z0-9_\-]{8,300})\b",
        max_length=7 + 300,
        keywords=("sk-ant-",),
    ),
    Rule(
        kind="aws_access_key_id",
        # Not inside a longer run of capitals and digits, whatever comes before it (`\nAKIA…`
        # in a JSON-escaped file): the delimiters are consumed, outside the secret.
        # AKIA a user's key, ASIA a temporary one, ABIA an STS service bearer token, ACCA a
        # context-specific credential (IAM's unique ID prefixes).
        pattern=r"(?:^|[^A-Z0-9])(?P<secret>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})(?:[^A-Z0-9]|$)",
        max_length=22,
        keywords=("akia", "asia", "abia", "acca"),
    ),
    # Forty characters of base64 are any hash or blob: only a labelled one is this kind.
    Rule(
        kind="aws_secret_access_key",
        pattern=(
            r"(?i:aws_?secret_?(?:access_?)?key|secret_?(?:access_?)?key)(?:\\?[\"'])?"
            r"\s{0,16}[:=]\s{0,16}(?:\\?[\"'])?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"
        ),
        max_length=len("aws_secret_access_key") + 2 + 16 + 1 + 16 + 2 + 40 + 1,
        keywords=("key",),
    ),
    Rule(
        kind="github_token",
        pattern=r"(?P<secret>gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{20,255})\b",
        max_length=len("github_pat_") + 255,
        keywords=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        kind="bearer_token",
        pattern=(
            r"\b(?i:bearer)\s{1,16}(?P<secret>[A-Za-z0-9\-._~+/]{8,4096}={0,3})"
            r"(?:[^A-Za-z0-9\-._~+/=]|$)"
        ),
        max_length=len("bearer") + 16 + 4096 + 3 + 1,
        keywords=("bearer",),
        validator=_has_digit,
    ),
    # RFC 5321's 64-character local part and RFC 1035's 63-character labels, up to nine labels.
    # No `\b` before the local part: Hyperscan then scans 150 times slower; a longer local
    # part loses its last 64 characters, as safe a side as any. The first branch takes a URL's
    # `user:password@host` whole, so its `password@host` is not read as an address (the
    # validator then drops it; url_password redacts the password, and the host stays).
    Rule(
        kind="email",
        pattern=(
            rf"(?P<secret>[A-Za-z][A-Za-z0-9+.\-]{{1,20}}://{_USERINFO}{{0,64}}:{_USERINFO}{{1,128}}"
            rf"@{_HOST}|[A-Za-z0-9._%+\-]{{1,64}}@{_HOST})(?:[^A-Za-z0-9\-]|$)"
        ),
        max_length=21 + 3 + 64 + 1 + 128 + 1 + 63 + 8 * 64 + 1,
        keywords=("@",),
        validator=_not_in_url,
    ),
)
