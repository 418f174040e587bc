"""Replace secrets in request text with `[REDACTED:<kind>]` before they leave the gateway.

Reaches the system prompt, string content, text blocks and tool_result
content (gateway_policies.text); never thinking or redacted_thinking blocks,
whose signatures the API checks. Kinds:

- `anthropic_api_key`: `sk-ant-...`
- `aws_access_key_id`: `AKIA...` / `ASIA...` (20 characters)
- `aws_secret_access_key`: 40 characters, only when labelled
  (`aws_secret_access_key = ...`, `SecretAccessKey: ...`): unlabelled, such a
  string is indistinguishable from any other base64
- `github_token`: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`
- `bearer_token`: the token of `Bearer <token>` when it has 8+ characters
  including a digit, so prose such as "Bearer authentication" survives
- `private_key`: a PEM private key block, up to the end of the text when its
  END line is missing (a pasted key cut short is still a key)
- `email`: e-mail addresses within RFC 5321's limits (a local part of at most
  64 characters, domain labels of at most 63, at most 127 labels after the first)

Not bypassable: the passthrough fallback redacts the original again before
resending it (the narrow fallback), so a secret never leaves through it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Literal

from ..options import PolicyOptions
from ..text import TextRewriter, subn_in_windows

Kind = Literal[
    "anthropic_api_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "github_token",
    "bearer_token",
    "private_key",
    "email",
]

# Each pattern's group "secret" is what gets replaced; text around it (a label,
# the word Bearer) stays so the model still understands the sentence. Specific
# kinds come first so "Bearer sk-ant-..." is named for what it is.
# Prefixed kinds have no leading word boundary: in JSON-encoded tool output a
# key often follows a literal "\\n" or "\\t", whose letter is a word character.
# Redacting a little too much is the safe side of this trade.
#
# Every pattern runs over up to the whole body limit of text, so each must be
# linear in it. A run of a class may be unbounded only when a scan of it is never
# repeated from a later start: the match then succeeds and consumes the run (the
# key kinds, the PEM body), or the run cannot hold another start (a bearer token
# ends at whitespace, which every later `Bearer ` needs). Otherwise it is bounded:
# the e-mail's local part, unbounded, made "a.a.a…" without an "@" rescan the rest
# of the run from each of its characters (quadratic: minutes of CPU per request).
# tests/test_redaction_cpu.py holds each pattern to this.
#
# Linear is not enough for the e-mail pattern: it may read 64 characters from
# each word boundary, so one pass over 6 MB of "a.a.…" takes most of a second,
# and Python's `re` holds the interpreter lock for a whole call, stalling every
# other call of a `serve` process. Its matches are bounded (EMAIL_LONGEST), so it
# runs a window at a time (`text.subn_in_windows`), exactly as one call would.
PATTERNS: dict[str, re.Pattern[str]] = {
    "private_key": re.compile(
        r"(?P<secret>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*))",
        re.DOTALL,
    ),
    "anthropic_api_key": re.compile(r"(?P<secret>sk-ant-[A-Za-z0-9_\-]{8,})"),
    "aws_access_key_id": re.compile(
        r"(?P<secret>(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9]))"
    ),
    "aws_secret_access_key": re.compile(
        r"(?i:aws_?secret_?(?:access_?)?key|secret_?(?:access_?)?key)(?:\\?[\"'])?\s*[:=]\s*"
        r"(?:\\?[\"'])?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
    ),
    "github_token": re.compile(
        r"(?P<secret>(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}))"
    ),
    "bearer_token": re.compile(
        r"(?i:\bbearer)\s+(?P<secret>(?=[A-Za-z0-9\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{8,}=*)"
    ),
    # A local part of at most 64 characters (RFC 5321) and labels of at most 63
    # (RFC 1035). Possessive (`+`): a run that cannot be followed by "@" or "."
    # is never retried shorter, since a shorter one is followed by a class character.
    "email": re.compile(
        r"(?P<secret>\b[A-Za-z0-9._%+\-]{1,64}+@[A-Za-z0-9\-]{1,63}+(?:\.[A-Za-z0-9\-]{1,63}){1,127})"
    ),
}

EMAIL_LONGEST = 64 + 1 + 63 + 127 * (1 + 63)
"""The longest text the e-mail pattern can match."""

WINDOWED = {"email": EMAIL_LONGEST}
"""Patterns run a window at a time, with the longest text each can match."""


class RedactSecretsOptions(PolicyOptions):
    kinds: list[Kind] | None = None
    """Redact only these kinds; all of them when omitted."""


def _redactor(kind: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        start, end = match.span("secret")
        whole = match.group(0)
        offset = match.start()
        return f"{whole[: start - offset]}[REDACTED:{kind}]{whole[end - offset :]}"

    return replace


def _substitution(kind: str) -> Callable[[str], tuple[str, int]]:
    """`subn` with the kind's redactor: a window at a time for a windowed pattern."""
    pattern, replace = PATTERNS[kind], _redactor(kind)
    longest = WINDOWED.get(kind)
    if longest is None:
        return partial(pattern.subn, replace)
    return partial(subn_in_windows, pattern, replace, longest=longest)


class RedactSecrets(TextRewriter[RedactSecretsOptions]):
    name = "redact_secrets"
    bypassable = False
    action = "redact"

    def setup(self) -> None:
        wanted = set(self.options.kinds or PATTERNS)
        self._patterns = [(kind, _substitution(kind)) for kind in PATTERNS if kind in wanted]

    def rewrite(self, text: str) -> str:
        return self.rewrite_counted(text)[0]

    def rewrite_counted(self, text: str) -> tuple[str, dict[str, int]]:
        counts: dict[str, int] = {}
        for kind, substitute in self._patterns:
            text, found = substitute(text)
            if found:
                counts[kind] = found
        return text, counts
