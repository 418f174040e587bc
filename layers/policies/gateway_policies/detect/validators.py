"""Checks a rule's `secret` text must pass: checksums, valid ranges, and the shape of a real value.

A pattern says what a family looks like; a validator says whether this text is one: a GitHub or
npm token whose CRC32 suffix is right, a card number that passes Luhn, an IBAN whose mod-97 is 1,
an SSN in an area the SSA issues, or a labelled value random enough to be a secret rather than a
variable name, a placeholder or a template reference. Each takes the `secret` text alone and
returns whether to keep the match.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import zlib
from collections import Counter
from urllib.parse import unquote

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
"""The digit order GitHub's and npm's token checksums are written in."""

CHECKSUM_LENGTH = 6
"""Characters of base62 CRC32 at the end of a GitHub or npm token."""

PLACEHOLDER_WORDS = (
    "example",
    "sample",
    "dummy",
    "placeholder",
    "changeme",
    "change_me",
    "redacted",
    "your_",
    "your-",
    "yourkey",
    "insert",
    "replace",
    "secret_here",
    "token_here",
    "key_here",
    "password",
    "passwd",
    "xxxx",
    "****",
    "....",
    "0000",
    "abcdef",
    "123456",
)
"""Text that makes a value a documentation stand-in rather than a credential."""

_REPEAT_RUN = 6
"""A token of random characters has no run of this many equal ones (under 1 in 10^7 per token)."""

_TEMPLATE_MARKS = ("${", "{{", "}}", "%(", "%s", "<", ">", "$(")
"""A value with one of these is a reference to a secret held elsewhere, not the secret."""

# Each list as one pattern, searched in C: a crafted body makes the validators look at tens
# of thousands of candidate values, and a Python loop over the words per value cost seconds.
_PLACEHOLDER = re.compile("|".join(map(re.escape, PLACEHOLDER_WORDS)))
_TEMPLATE = re.compile("|".join(map(re.escape, _TEMPLATE_MARKS)))

GENERIC_MIN_ENTROPY = 3.0
"""Bits per character a labelled value needs: "s3cr3t-Pa55w0rd!" has 3.6, "my_password1" 3.0."""


def shannon_entropy(text: str) -> float:
    """Bits per character of the text's own character distribution."""
    if not text:
        return 0.0
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in Counter(text).values())


_RUNS = {length: re.compile(rf"(.)\1{{{length - 1}}}", re.DOTALL) for length in (4, 6)}
"""A run of one character, by its length: searched in C, since a crafted body can make a
validator look at tens of thousands of candidate values."""


def _has_run(text: str, length: int) -> bool:
    return _RUNS[length].search(text) is not None


def plausible_token(token: str) -> bool:
    """Random enough to be an issued token: no placeholder word, no long run of one character.

    Not detect-secrets' sequential-string filter (`abcdefgh`, `01234567`): the fake tokens
    people test with count up, and a redaction gateway that lets them through looks broken."""
    folded = token.lower()
    if any(word in folded for word in ("example", "xxxxx", "placeholder", "your_", "your-")):
        return False
    return not _has_run(token, _REPEAT_RUN)


def plausible_value(value: str) -> bool:
    """A labelled value (`password=…`) that is a secret: long enough, mixed, random, not a
    reference (`$VAR`, `{{ x }}`, `<your-key>`), a name (`self.password`), a path or a URL."""
    folded = value.lower()
    if len(value) < 8 or _TEMPLATE.search(value):
        return False
    if value[0] in "$%@/.~" or "://" in value or folded in ("none", "null", "true", "false"):
        return False
    if _PLACEHOLDER.search(folded) or _has_run(value, 4):
        return False
    has_digit = any(map(str.isdigit, value))
    has_alpha = any(map(str.isalpha, value))
    if not (has_digit and has_alpha):
        return False
    return shannon_entropy(value) >= GENERIC_MIN_ENTROPY


def plausible_password(password: str) -> bool:
    """A password in a URL or a `curl -u`: anything but a placeholder or a reference."""
    folded = password.lower()
    if _TEMPLATE.search(password) or password[0] == "$":
        return False
    if _PLACEHOLDER.search(folded) or folded in ("pass", "pwd", "secret"):
        return False
    return not _has_run(password, 4)


COMMAND_PASSWORD_MIN = 6
"""Characters a password on a command line needs: a port (`-p 2222`) has at most five."""


_NOT_A_COMMAND_PASSWORD = re.compile(r"[0-9.:]+(?:/(?:tcp|udp))?|[A-Za-z_.-]+|(?:\.?/|~).*")
"""A port mapping (`-p3306:3306`), a name (`--password DB_PASS`, `self.db_pass`) or a path
(`--password /run/secrets/db`): what a command line or its help text puts after such an option."""


def command_password(password: str) -> bool:
    """A password given as a command's option: a plausible password (`plausible_password`) of
    at least six characters, not a port mapping, a name or a path (_NOT_A_COMMAND_PASSWORD)."""
    if len(password) < COMMAND_PASSWORD_MIN or _NOT_A_COMMAND_PASSWORD.fullmatch(password):
        return False
    return plausible_password(password)


def base62(number: int, width: int) -> str:
    """`number` in base62 (BASE62's digit order), left-padded with zeros to `width`."""
    digits = ""
    while number:
        number, digit = divmod(number, 62)
        digits = BASE62[digit] + digits
    return digits.rjust(width, "0")


def crc32_suffix(token: str, prefix_length: int) -> bool:
    """GitHub's and npm's token format: after the prefix, random base62 and then the CRC32 of
    that random part in six base62 digits."""
    body, checksum = token[prefix_length:-CHECKSUM_LENGTH], token[-CHECKSUM_LENGTH:]
    return base62(zlib.crc32(body.encode()), CHECKSUM_LENGTH) == checksum


def npm_checksum(token: str) -> bool:
    """`npm_` + 30 random + 6 checksum."""
    return crc32_suffix(token, len("npm_"))


def github_checksum(token: str) -> bool:
    """`ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 30 random + 6 checksum; other GitHub forms pass."""
    if token[:4] in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_") and len(token) == 40:
        return crc32_suffix(token, 4)
    return True


_GITLAB_RANDOM_BYTES = 16
_GITLAB_ROUTABLE = re.compile(r"[a-z]+-([A-Za-z0-9_-]+)\.01\.([0-9a-z]{2})([0-9a-z]{7})")


def gitlab_token(token: str) -> bool:
    """A GitLab token: a plausible random part, and for a routable one (`….01.<ll><crc>`) its
    payload length `ll` and its CRC32 of everything before it, both in base 36."""
    if "." not in token:
        return plausible_token(token)
    routable = _GITLAB_ROUTABLE.fullmatch(token)
    if routable is None:
        return False
    payload, length, checksum = routable.groups()
    if int(length, 36) != len(payload) or int(checksum, 36) != zlib.crc32(token[:-7].encode()):
        return False
    # The decoded payload ends with the routing payload's length: what precedes the routing
    # payload is the random part, at least 16 bytes.
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    return len(decoded) - 1 - decoded[-1] >= _GITLAB_RANDOM_BYTES


def atlassian_token(token: str) -> bool:
    """An Atlassian API token ends with `=` and the CRC32, in upper-case hex, of all before it."""
    body, checksum = token[:-8], token[-8:]
    return f"{zlib.crc32(body.encode()):08X}" == checksum and plausible_token(body)


def luhn(number: str) -> bool:
    """A payment card number (spaces or dashes between groups) passes the Luhn check."""
    digits = [int(c) for c in number if c.isdigit()]
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


_CARD_NETWORKS: tuple[tuple[tuple[int, int], tuple[int, ...]], ...] = (
    ((4, 4), (13, 16, 19)),  # Visa
    ((51, 55), (16,)),  # Mastercard
    ((2221, 2720), (16,)),  # Mastercard's 2-series
    ((34, 34), (15,)),  # American Express
    ((37, 37), (15,)),
    ((6011, 6011), (16, 17, 18, 19)),  # Discover
    ((644, 649), (16, 17, 18, 19)),
    ((65, 65), (16, 17, 18, 19)),
    ((3528, 3589), (16, 17, 18, 19)),  # JCB
    ((300, 305), (14, 15, 16, 17, 18, 19)),  # Diners Club
    ((36, 36), (14, 15, 16, 17, 18, 19)),
    ((38, 39), (16, 17, 18, 19)),
    ((62, 62), (16, 17, 18, 19)),  # UnionPay
)
"""Issuer prefixes (IIN ranges) of the card networks and the lengths each issues."""


def payment_card(number: str) -> bool:
    """A card number of a network's prefix and length (groups separated by spaces or dashes)
    that passes Luhn."""
    digits = "".join(c for c in number if c.isdigit())
    for (low, high), lengths in _CARD_NETWORKS:
        prefix = int(digits[: len(str(low))])
        if low <= prefix <= high and len(digits) in lengths:
            return luhn(digits)
    return False


IBAN_LENGTHS = {
    **dict.fromkeys(("NO",), 15),
    **dict.fromkeys(("BE",), 16),
    **dict.fromkeys(("DK", "FI", "FO", "GL", "NL"), 18),
    **dict.fromkeys(("MK", "SI"), 19),
    **dict.fromkeys(("AT", "BA", "EE", "KZ", "LT", "LU", "XK"), 20),
    **dict.fromkeys(("CH", "HR", "LI", "LV"), 21),
    **dict.fromkeys(("BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS"), 22),
    **dict.fromkeys(("AE", "GI", "IL", "TL"), 23),
    **dict.fromkeys(("AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"), 24),
    **dict.fromkeys(("PT",), 25),
    **dict.fromkeys(("IS", "TR"), 26),
    **dict.fromkeys(("FR", "GR", "IT", "MC", "MR", "SM"), 27),
    **dict.fromkeys(("AL", "AZ", "CY", "DO", "GT", "HU", "LB", "PL"), 28),
    **dict.fromkeys(("BR", "EG", "PS", "QA", "UA"), 29),
    **dict.fromkeys(("JO", "KW", "MU"), 30),
    **dict.fromkeys(("MT",), 31),
}
"""The IBAN length of each country in the SWIFT registry."""


def iban(text: str) -> bool:
    """An IBAN (spaces allowed between groups) of its country's length with mod-97 equal to 1."""
    compact = text.replace(" ", "").upper()
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


_SSN_NEVER_ISSUED = ("078-05-1120", "219-09-9999")
"""Numbers printed in advertisements and void ever since."""


def us_ssn(text: str) -> bool:
    """An SSN the SSA can have issued: area not 000, 666 or 900-999, group not 00, serial not
    0000, and not one of the numbers voided after appearing in advertisements."""
    area, group, serial = re.split(r"[- ]", text)
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return False
    return text.replace(" ", "-") not in _SSN_NEVER_ISSUED


_CALLING_CODES = (
    "1 7 20 27 30 31 32 33 34 36 39 40 41 43 44 45 46 47 48 49 51 52 53 54 55 56 57 58 60 61 "
    "62 63 64 65 66 81 82 84 86 90 91 92 93 94 95 98 211 212 213 216 218 220 221 222 223 224 "
    "225 226 227 228 229 230 231 232 233 234 235 236 237 238 239 240 241 242 243 244 245 246 "
    "247 248 249 250 251 252 253 254 255 256 257 258 260 261 262 263 264 265 266 267 268 269 "
    "290 291 297 298 299 350 351 352 353 354 355 356 357 358 359 370 371 372 373 374 375 376 "
    "377 378 380 381 382 383 385 386 387 389 420 421 423 500 501 502 503 504 505 506 507 508 "
    "509 590 591 592 593 594 595 596 597 598 599 670 672 673 674 675 676 677 678 679 680 681 "
    "682 683 685 686 687 688 689 690 691 692 850 852 853 855 856 880 886 960 961 962 963 964 "
    "965 966 967 968 970 971 972 973 974 975 976 977 992 993 994 995 996 998 "
)
CALLING_CODES = frozenset(_CALLING_CODES.split())
"""ITU-T E.164 country calling codes in service."""


def phone(text: str) -> bool:
    """An E.164 number: `+`, an assigned country code, 8 to 15 digits in all; North American
    numbers have 11 digits and an area code and exchange that do not start with 0 or 1."""
    digits = "".join(c for c in text if c.isdigit())
    if not 8 <= len(digits) <= 15 or _has_run(digits, 6):
        return False
    if digits[0] == "1":
        return len(digits) == 11 and digits[1] not in "01" and digits[4] not in "01"
    return digits[:2] in CALLING_CODES or digits[:3] in CALLING_CODES


LONG_PASSWORD = 64
"""A password this long is an issued token (an ECR login's runs to thousands of characters):
a placeholder word or a run of one character in it is chance, not a stand-in."""


def _decoded(encoded: str) -> str | None:
    """`encoded` as base64 of ASCII text, padded if its padding was left off, or None."""
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None


def basic_credentials(encoded: str) -> bool:
    """An HTTP Basic value: base64 of printable `user:password` with a real password."""
    decoded = _decoded(encoded)
    if decoded is None or not decoded.isprintable():
        return False
    _, colon, password = decoded.partition(":")
    if not (colon and password):
        return False
    if len(password) >= LONG_PASSWORD:
        return not _TEMPLATE.search(password)
    return plausible_password(password)


def base64_password(encoded: str) -> bool:
    """npm's `_password`: base64 of the password alone, a real one."""
    decoded = _decoded(encoded)
    return decoded is not None and decoded.isprintable() and plausible_password(decoded)


_PEM_HEAD = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_WRAP = re.compile(r"\\[nr]|[\r\n]")


def base64_private_key(encoded: str) -> bool:
    """Base64 of a PEM private key (a kubeconfig's `client-key-data`): its first line, decoded,
    is a private key's BEGIN line (a certificate's is not a secret)."""
    head = _WRAP.sub("", encoded)[:88]
    decoded = _decoded(head[: len(head) - len(head) % 4])
    return decoded is not None and _PEM_HEAD.match(decoded) is not None


def docker_config(encoded: str) -> bool:
    """Base64 of a Docker client config (a `.dockerconfigjson`): some registry's `auth` holds
    real credentials, or its `password` is real; a config cut short counts when it names one."""
    decoded = _decoded(encoded)
    if decoded is None:
        return False
    named = '"auth"' in decoded or '"password"' in decoded
    # The pattern's prefix makes it begin `{`: without its closing `}` it is a config cut
    # short, which a parse would only refuse (a body of near matches is thousands of them).
    if not decoded.rstrip().endswith("}"):
        return named
    try:
        config = json.loads(decoded)
    except ValueError:
        return named
    registries = config.get("auths") if isinstance(config, dict) else None
    if not isinstance(registries, dict):
        return False
    for entry in registries.values():
        if not isinstance(entry, dict):
            continue
        auth, password = entry.get("auth"), entry.get("password")
        if isinstance(auth, str) and auth and basic_credentials(auth):
            return True
        if isinstance(password, str) and password and plausible_password(password):
            return True
    return False


def labelled_secret(value: str) -> bool:
    """A labelled value (`plausible_value`); when it is base64 of printable text (what `auth`
    and `_password` hold in registry configs), the text it encodes: `user:password` with a
    real password, or a real password (`Y2hhbmdlbWU=` is `changeme`)."""
    decoded = _decoded(value) if len(value) % 4 == 0 else None
    if decoded is None or not decoded.isprintable():
        return plausible_value(value)
    if ":" in decoded:
        return basic_credentials(value)
    return plausible_password(decoded)


def azure_signature(signature: str) -> bool:
    """A SAS `sig`: URL-encoded base64 of a 32-byte HMAC-SHA256."""
    try:
        return len(base64.b64decode(unquote(signature), validate=True)) == 32
    except binascii.Error:
        return False


def jwt_header(token: str) -> bool:
    """A JWT whose first segment decodes to a JSON header naming an `alg`."""
    header = token.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))
    except binascii.Error:
        return False
    return b'"alg"' in decoded and plausible_token(token.rsplit(".", 1)[-1])
