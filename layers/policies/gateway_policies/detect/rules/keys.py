"""Private keys that are not PEM blocks (PEM and PGP blocks are the core kind `private_key`),
and PEM blocks wrapped in base64."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import token
from ..validators import base64_private_key

_PUTTY_BODY_LONGEST = 8192
"""Characters of a PuTTY key file between its header and MAC lines (an RSA-8192 key ~ 7,000)."""

_B64 = "A-Za-z0-9+/"
_BREAK = r"(?:\r?\n|\\n)"
_WRAPPED_LINES = 300
"""Lines of a wrapped key: an 8192-bit RSA key's PEM is about 6,400 characters, 8,600 as
base64, 113 lines of 76 or 135 of 64."""
_B64_PEM_LONGEST = 16384
"""Characters of an unwrapped key: the same key on one line, with room to spare."""

RULES: tuple[Rule, ...] = (
    # A PEM private key as base64 (a kubeconfig's `client-key-data`, a Secret's `tls.key`, a
    # CI variable): base64 of `-----BEGIN ` is always `LS0tLS1CRUdJTi`, distinctive enough to
    # need no boundary before it (a URL's path, base64 of a file holding the key). On one line,
    # or wrapped as `base64` (76 columns) and `openssl base64` (64) wrap it.
    Rule(
        kind="base64_private_key",
        pattern=(
            r"(?P<secret>LS0tLS1CRUdJTi"
            rf"(?:[{_B64}]{{50}}(?:[{_B64}]{{12}})?{_BREAK}"
            rf"(?:[{_B64}]{{64}}(?:[{_B64}]{{12}})?{_BREAK}){{0,{_WRAPPED_LINES}}})?"
            rf"[{_B64}]{{8,{_B64_PEM_LONGEST}}}={{0,2}})(?:[^{_B64}=]|$)"
        ),
        max_length=14 + (62 + 2) + (76 + 2) * _WRAPPED_LINES + _B64_PEM_LONGEST + 2 + 1,
        keywords=("ls0tls1crudjti",),
        lead=0,
        validator=base64_private_key,
    ),
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
