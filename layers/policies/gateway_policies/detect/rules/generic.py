"""Credentials found by where they are written rather than by their shape: passwords given as
a command's options (`--password …`, `mysql -p…`), labelled values (`password=…`,
`api_key: …`), passwords in URLs, `curl -u`, HTTP Basic headers.

Every value here must look like a secret to count (validators.plausible_value and
plausible_password): long enough, letters and digits, random, and not a placeholder, a template
reference (`${DB_PASSWORD}`, `{{ .Values.token }}`), a variable name or a path.
"""

from __future__ import annotations

from ..rule import Rule
from ..shapes import ESCAPE, TOKEN_ALPHABET, labelled, left, segment
from ..shapes import URL_USERINFO as _USERINFO
from ..validators import basic_credentials, command_password, plausible_password

_VALUE = r"[A-Za-z0-9!#$%&*+./:=?@^_|~-]{8,128}"

# An option's value: a shell word that is not the next option and ends at the shell's own
# operators (`-pS3cret<dump.sql`, `-pS3cret|gzip`), or a quoted one, spaces and all (a rule
# of its own for each quote: `re` takes a group's name once per pattern).
_WORD_END = r" \t\r\n\"'\\<>|&;()`"
_VALUES = (
    (rf"\\?[\"']?(?P<secret>[^-{_WORD_END}][^{_WORD_END}]{{2,127}})(?:[{_WORD_END}]|$)", 2 + 129),
    (r"\\?\"(?P<secret>[^\"\\\r\n]{6,128})\\?\"", 2 + 128 + 2),
    (r"'(?P<secret>[^'\\\r\n]{6,128})'", 1 + 128 + 1),
)
# The rest of one command before an option: it ends at a line's or a pipeline's end, a
# written-out escape included. An argument list's items (`["mysql", "-uroot", "-pX"]`) are
# the same words, quoted and separated by commas, their quotes escaped inside a JSON string.
_COMMAND_TAIL = r"(?:(?:[ \t\"',]|\\[\"'])(?:[^\r\n|;&\\]|\\[\"']){0,200}?)?"
_COMMAND_TAIL_WIDTH = 2 * 201
_ARGUMENT = r"[ \t](?:\\?[\"'])?"
"""Before an option: a blank, and the quote that opens it in an argument list."""
_ARGUMENT_WIDTH = 3

# The value after an option: `=`, blanks, an argument list's `", "`, or the next line: an
# argument list printed one item a line (`"--password",\n  "X"`) or a YAML list's next item
# (`- --password\n  - X`).
_NEXT_LINE = r"(?:\r?\n|\\n)(?:[ \t]|\\t){0,16}"
_OPTION_VALUE = (
    rf"(?:=|[ \t]{{1,4}}|\\?[\"'],(?:[ \t]{{0,4}}|{_NEXT_LINE})|{_NEXT_LINE}-[ \t]{{1,4}})"
)
_OPTION_VALUE_WIDTH = 3 + 2 + 32 + 5

# `--password` and its kin (`--passwd`, `--pass`, `--pwd`) after the text's start, a blank, a
# quote, `=` or a written-out newline (a tool's JSON output holding the command).
_LONG_OPTION = (
    rf"(?:^|{ESCAPE}|[ \t\"'=])--(?:(?:db|admin|root|master-user|new)-)?"
    rf"(?:passw(?:or)?d|pass|pwd){_OPTION_VALUE}"
)
_LONG_OPTION_WIDTH = 2 + 2 + len("master-user-password") + _OPTION_VALUE_WIDTH
# `-p` is a port to ssh and `docker run`, a password only to these: MySQL's and MariaDB's
# clients (attached, `-pS3cret`: `-p S3cret` prompts and names a database), MongoDB's shells
# (`-p S3cret`), a registry's or a platform's login (docker, podman, nerdctl, buildah, skopeo,
# `helm registry`, OpenShift's `oc`, Cloud Foundry's `cf`, the Azure CLI's `az` with a service
# principal), sshpass (before the command it runs); redis-cli's is `-a` or `--pass`.
_LOGINS = r"(?:docker|podman|nerdctl|buildah|skopeo|oc|cf|az|helm[ \t]{1,4}registry)"
_SHORT_OPTION = (
    rf"(?:{left(TOKEN_ALPHABET)}(?:(?:mysql[a-z]{{0,6}}|mariadb(?:-[a-z]{{1,8}})?)"
    + _COMMAND_TAIL
    + _ARGUMENT
    + r"-p"
    + rf"|(?:{_LOGINS}[ \t]{{1,4}}login|mongo(?:sh)?)"
    + _COMMAND_TAIL
    + _ARGUMENT
    + rf"-p(?:{_OPTION_VALUE})?"
    + r"|sshpass(?:[ \t]{1,4}-[ehv]){0,3}[ \t]{1,4}-p[ \t]{0,4}"
    + r"|redis-cli"
    + _COMMAND_TAIL
    + r"[ \t](?:-a|--pass)[ \t]{1,4}))"
)
# The widest branch: an escape, `helm`, 4 blanks, `registry`, 4 blanks, `login`, then the
# tail, the option and its value's lead.
_SHORT_OPTION_LEAD = 2 + 4 + 4 + 8 + 4
_SHORT_OPTION_WIDTH = 2 + 25 + _COMMAND_TAIL_WIDTH + _ARGUMENT_WIDTH + 2 + _OPTION_VALUE_WIDTH


# A short word is a label only as a whole segment (`DB_PASS`, `smtpPass`, `REDIS_AUTH`, never
# `bypass`, `passenger`, `author`); `auth` only as the label's last (`AUTH_TYPE` is no secret).
_PASS = segment(("pass", "pw"))
_AUTH = segment(("auth",), last=True)
# `key` is a secret's label only with a qualifier before it (`api_key`, `ENCRYPTION_KEY`,
# `masterKey`, `Ocp-Apim-Subscription-Key`): a bare `key` is any map's key.
_KEY_QUALIFIERS = (
    "api|access|auth|encryption|enc|master|signing|private|client|secret|app|session|hmac|jwt"
    "|license|subscription|shared|webhook|consumer|storage|account|cipher|crypto|root|admin"
)

# Credential files whose lines carry no `=` label: ~/.netrc (`machine h login u password p`,
# on one line or several) and ~/.pgpass (`host:port:database:user:password`, `*` for any).
_BLANK = rf"(?:[ \t\r\n]|{ESCAPE})"
_NETRC_FIELD = r"[^ \t\r\n]{1,128}"
_BLANKS = 8 * 2
_NETRC_WIDTH = 7 + _BLANKS + 128 + 3 * (_BLANKS + 7 + _BLANKS + 128) + 2 * _BLANKS + 8 + 128 + 1
_PGPASS_FIELD = r"[^: \t\r\n\\\"']{1,63}"
_PGPASS_WIDTH = 2 + 253 + 1 + 5 + 2 * (1 + 63) + 1 + 128 + 1
_FILE_LINES = (
    Rule(
        kind="netrc_password",
        pattern=(
            rf"(?:machine{_BLANK}{{1,8}}{_NETRC_FIELD}|default)"
            rf"(?:{_BLANK}{{1,8}}(?:login|account|port){_BLANK}{{1,8}}{_NETRC_FIELD}){{0,3}}"
            rf"{_BLANK}{{1,8}}password{_BLANK}{{1,8}}"
            r"(?P<secret>[^ \t\r\n\\\"']{1,128})(?:[ \t\r\n\\\"']|$)"
        ),
        max_length=_NETRC_WIDTH,
        keywords=("password",),
        validator=plausible_password,
    ),
    Rule(
        kind="pgpass_password",
        pattern=(
            rf"(?:^|[\r\n\"' \t]|{ESCAPE})[A-Za-z0-9._*-]{{1,253}}:(?:[0-9]{{1,5}}|\*)"
            rf":{_PGPASS_FIELD}:{_PGPASS_FIELD}"
            r":(?P<secret>[^:\r\n\\\"']{1,128})(?:[\r\n\\\"']|$)"
        ),
        max_length=_PGPASS_WIDTH,
        keywords=(":",),
        validator=command_password,
    ),
)


def _options(
    kind: str, option: str, width: int, keywords: tuple[str, ...], lead: int | None = None
) -> tuple[Rule, ...]:
    """A password given after `option`: one rule per way its value may be written."""
    return tuple(
        Rule(
            kind=kind,
            pattern=option + value,
            max_length=width + value_width,
            keywords=keywords,
            lead=lead,
            head=option,
            validator=command_password,
        )
        for value, value_width in _VALUES
    )


RULES: tuple[Rule, ...] = (
    # Before the labelled values: `--password=…` is one too, and this kind names it.
    *_options("cli_password_flag", _LONG_OPTION, _LONG_OPTION_WIDTH, ("pass", "pwd")),
    *_options(
        "cli_password_short_flag",
        _SHORT_OPTION,
        _SHORT_OPTION_WIDTH,
        ("mysql", "mariadb", "login", "mongo", "sshpass", "redis-cli"),
        # A command begins at its keyword, but for `login`: an escape, `helm`, 4 blanks,
        # `registry` and 4 blanks before it. Found by its keywords: its pattern, of bounded
        # repeats up to 200 wide, cost Hyperscan about 2 s to compile per way of writing it.
        _SHORT_OPTION_LEAD,
    ),
    labelled(
        "generic_password",
        r"(?:passw(?:or)?d|passphrase|pwd)",
        10,
        _VALUE,
        128,
        ("passw", "passphrase", "pwd"),
    ),
    labelled("generic_password", *_PASS, _VALUE, 128, ("pass", "pw"), tail=False),
    labelled(
        "generic_secret",
        rf"(?:secret|token|credentials?|(?:{_KEY_QUALIFIERS})[_.-]?key)",
        len("subscription") + 2 + 3,
        _VALUE,
        128,
        ("secret", "token", "key", "credential"),
    ),
    labelled("generic_secret", *_AUTH, _VALUE, 128, ("auth",), tail=False),
    *_FILE_LINES,
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
