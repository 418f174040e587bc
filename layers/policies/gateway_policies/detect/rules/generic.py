"""Credentials found by where they are written rather than by their shape: passwords given as
a command's options (`--password …`, `mysql -p…`), labelled values (`password=…`,
`api_key: …`), passwords in URLs, `curl -u`, HTTP Basic headers.

Every value here must look like a secret to count (validators.plausible_value and
plausible_password): long enough, letters and digits, random, and not a placeholder, a template
reference (`${DB_PASSWORD}`, `{{ .Values.token }}`), a variable name or a path.
"""

from __future__ import annotations

from ..rule import Rule
from ..shapes import URL_USERINFO as _USERINFO
from ..shapes import labelled
from ..validators import basic_credentials, command_password, plausible_password

_VALUE = r"[A-Za-z0-9!#$%&*+./:=?@^_|~-]{8,128}"

# An option's value: a shell word, or a quoted one, that is not the next option.
_ARGUMENT = r"(?P<secret>[^- \t\r\n\"'\\][^ \t\r\n\"'\\]{2,127})(?:[\\\"' \t\r\n]|$)"
_ARGUMENT_WIDTH = 128 + 1
_QUOTE = r"\\?[\"']?"
# The rest of one command before an option: it ends at a line's or a pipeline's end.
_COMMAND_TAIL = r"(?:[ \t][^\r\n|;&]{0,200}?)?"
_COMMAND_TAIL_WIDTH = 201

# `-p` is a port to ssh and `docker run`, a password only to these: MySQL's and MariaDB's
# clients (attached, `-pS3cret`: `-p S3cret` prompts and names a database), a registry login,
# sshpass (before the command it runs); redis-cli's is `-a` or `--pass`.
_SHORT_FLAG_COMMANDS = (
    r"(?:(?:^|[^A-Za-z0-9_-])(?:mysql[a-z]{0,6}|mariadb(?:-[a-z]{1,8})?)"
    + _COMMAND_TAIL
    + r"[ \t]-p"
    + r"|(?:docker|podman|nerdctl|buildah)[ \t]{1,4}login"
    + _COMMAND_TAIL
    + r"[ \t]-p(?:[ \t]{1,4}|=)?"
    + r"|sshpass(?:[ \t]{1,4}-[ehv]){0,3}[ \t]{1,4}-p[ \t]{0,4}"
    + r"|redis-cli"
    + _COMMAND_TAIL
    + r"[ \t](?:-a|--pass)[ \t]{1,4})"
)
# The widest branch: a boundary and `mariadb-` + 8 letters, or `nerdctl`, 4 blanks, `login`,
# then the tail, the option and its blanks.
_SHORT_FLAG_COMMANDS_WIDTH = 1 + 16 + _COMMAND_TAIL_WIDTH + 6 + 4

RULES: tuple[Rule, ...] = (
    # Before the labelled values: `--password=…` is one too, and this kind names it.
    Rule(
        kind="cli_password_flag",
        pattern=(
            r"(?:^|[ \t\"'=])--(?:(?:db|admin|root|master-user|new)-)?passw(?:or)?d"
            r"(?:(?:=|[ \t]{1,4})" + _QUOTE + r"|\\?[\"'],[ \t]{0,4}\\?[\"'])" + _ARGUMENT
        ),
        max_length=1 + 2 + len("master-user-password") + 2 + 1 + 4 + 2 + _ARGUMENT_WIDTH,
        keywords=("passw",),
        validator=command_password,
    ),
    Rule(
        kind="cli_password_short_flag",
        pattern=_SHORT_FLAG_COMMANDS + _QUOTE + _ARGUMENT,
        max_length=_SHORT_FLAG_COMMANDS_WIDTH + 2 + _ARGUMENT_WIDTH,
        keywords=("mysql", "mariadb", "login", "sshpass", "redis-cli"),
        validator=command_password,
    ),
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
