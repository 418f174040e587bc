"""Credentials found by where they are written rather than by their shape: labelled values
(`password=…`, `api_key: …`), passwords in URLs, `curl -u`, HTTP Basic headers.

Every value here must look like a secret to count (validators.plausible_value and
plausible_password): long enough, letters and digits, random, and not a placeholder, a template
reference (`${DB_PASSWORD}`, `{{ .Values.token }}`), a variable name or a path.
"""

from __future__ import annotations

from ..rule import Rule
from ..shapes import URL_USERINFO as _USERINFO
from ..shapes import labelled
from ..validators import basic_credentials, plausible_password

_VALUE = r"[A-Za-z0-9!#$%&*+./:=?@^_|~-]{8,128}"

RULES: tuple[Rule, ...] = (
    labelled(
        "generic_password",
        r"(?:passw(?:or)?d|passphrase|pwd)",
        10,
        _VALUE,
        128,
        ("passw", "passphrase", "pwd"),
    ),
    labelled(
        "generic_secret",
        r"(?:secret|token|api_?key|apikey|access_?key|auth_?key|credentials?)",
        11,
        _VALUE,
        128,
        ("secret", "token", "api", "key", "credential"),
    ),
    # scheme://user:password@host: the password is redacted, the user and host stay.
    Rule(
        kind="url_password",
        pattern=(
            rf"[A-Za-z][A-Za-z0-9+.-]{{1,20}}://{_USERINFO}{{0,64}}:"
            rf"(?P<secret>{_USERINFO}{{1,128}})@[A-Za-z0-9\[]"
        ),
        max_length=21 + 3 + 64 + 1 + 128 + 2,
        keywords=("://",),
        validator=plausible_password,
    ),
    Rule(
        kind="curl_basic_auth",
        pattern=(
            r"curl(?:[ \t][^\r\n]{0,200}?)?[ \t](?:-u|--user)(?:[ \t]{1,4}|=)[\"']?"
            r"[^ \t\r\n:\"']{1,64}:(?P<secret>[^ \t\r\n\"']{3,128})(?:[\"' \t\r\n]|$)"
        ),
        max_length=4 + 201 + 1 + 6 + 4 + 1 + 64 + 1 + 128 + 1,
        keywords=("curl",),
        validator=plausible_password,
    ),
    Rule(
        kind="basic_auth_header",
        pattern=r"basic[ \t]{1,4}(?P<secret>[A-Za-z0-9+/]{6,400}={0,2})(?:[^A-Za-z0-9+/=]|$)",
        max_length=5 + 4 + 402 + 1,
        keywords=("basic",),
        validator=basic_credentials,
        ignore_case=True,
    ),
)
