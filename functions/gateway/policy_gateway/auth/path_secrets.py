"""A credential in the URL: found in any reading the upstream could decode, and kept out.

A client that puts its key in the path (`/v1/models/<key>`) or the query would
hand it to the upstream in the request line, and to the spans (`url.path`, the
span's name). Only values of at least `gateway_keys.MIN_SECRET_LENGTH` characters are
looked for, so a short word is never taken for a key.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote, unquote_plus

REDACTED = "[redacted]"


def carries_secret(text: str, secrets: Sequence[str]) -> bool:
    """Whether `text` holds a secret as is, %-decoded, or with `+` read as a space."""
    if not secrets:
        return False
    readings = (text, unquote(text, "latin-1"), unquote_plus(text, "latin-1"))
    return any(secret in reading for secret in secrets for reading in readings)


def redact_path(path: str, secrets: Sequence[str]) -> str:
    """`path` with every segment that carries a secret blanked out; a secret spread
    over several segments blanks the whole path."""
    if not carries_secret(path, secrets):
        return path
    redacted = "/".join(
        REDACTED if carries_secret(segment, secrets) else segment for segment in path.split("/")
    )
    return "/" + REDACTED if carries_secret(redacted, secrets) else redacted
