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
- `email`: e-mail addresses

Not bypassable: the passthrough fallback would resend the unredacted original.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from ..options import PolicyOptions
from ..text import TextRewriter

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
    "email": re.compile(r"(?P<secret>\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+)"),
}


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


class RedactSecrets(TextRewriter[RedactSecretsOptions]):
    name = "redact_secrets"
    bypassable = False

    def setup(self) -> None:
        wanted = set(self.options.kinds or PATTERNS)
        self._patterns = [
            (pattern, _redactor(kind)) for kind, pattern in PATTERNS.items() if kind in wanted
        ]

    def rewrite(self, text: str) -> str:
        for pattern, replace in self._patterns:
            text = pattern.sub(replace, text)
        return text
