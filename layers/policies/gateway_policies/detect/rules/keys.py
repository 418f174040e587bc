"""Private keys that are not PEM blocks (PEM and PGP blocks are the core kind `private_key`)."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import token

_PUTTY_BODY_LONGEST = 8192
"""Characters of a PuTTY key file between its header and MAC lines (an RSA-8192 key ~ 7,000)."""

RULES: tuple[Rule, ...] = (
    token(
        "age_secret_key",
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        74,
        ("age-secret-key-1",),
    ),
    Rule(
        kind="putty_private_key",
        pattern=(
            r"(?P<secret>PuTTY-User-Key-File-[23]: [^\r\n]{1,64}\r?\n"
            rf"[^\x00]{{0,{_PUTTY_BODY_LONGEST}}}?Private-MAC: [a-f0-9]{{40,64}})"
        ),
        max_length=24 + 64 + 2 + _PUTTY_BODY_LONGEST + 13 + 64,
        keywords=("putty-user-key-file-",),
    ),
)
