"""Replace secrets in request text with `[REDACTED:<kind>]` before they leave the gateway.

What counts as a secret is the detector's rule catalogue (gateway_policies.detect):
`kinds` names the families to redact, every default-on one when omitted. The
original seven keep their meaning, since chains name them:

- `anthropic_api_key`: `sk-ant-...`
- `aws_access_key_id`: `AKIA...` / `ASIA...` (20 characters)
- `aws_secret_access_key`: 40 characters, only when labelled
  (`aws_secret_access_key = ...`, `SecretAccessKey: ...`): unlabelled, such a
  string is indistinguishable from any other base64
- `github_token`: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`
- `bearer_token`: the token of `Bearer <token>` when it has 8+ characters
  including a digit, so prose such as "Bearer authentication" survives
- `private_key`: a PEM or PGP private key block, up to its END line, or to the
  end of the text when the END line is missing (a pasted key cut short is still a key)
- `email`: e-mail addresses within RFC 5321's limits; on by default, as it
  always was. The other personal-data kinds (`payment_card`, `iban`, `us_ssn`,
  `phone`) are redacted only when `kinds` names them.

Reaches every field the upstream reads as text (gateway_policies.text): the
system prompt, message strings and text blocks, tool results, plain-text
documents, search results, and each string value of the `input` of every
`tool_use` and `server_tool_use` in the history (so the JSON stays valid).
Never ids, signatures, thinking blocks, encrypted or base64 data, file ids,
`cache_control` or MCP servers' credentials.

Each text's findings are kept in the process's memo (detect/memo.py), one
partition per instance and caller, so a conversation resent every turn is
scanned once; a redaction is a pure function of the text, so the
prompt-cache prefix stays stable turn to turn.

Not bypassable: the passthrough fallback redacts the original again before
resending it (the narrow fallback), so a secret never leaves through it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from types import MappingProxyType

from pydantic import field_validator

from ..base import PolicyContext
from ..detect import Detector, catalogue, detector
from ..detect.memo import MEMO, Entry, Found
from ..options import PolicyOptions
from ..text import Rewritten, TextRewriter

_NOTHING: Mapping[str, int] = MappingProxyType({})


class RedactSecretsOptions(PolicyOptions):
    kinds: list[str] | None = None
    """Redact only these kinds; every default-on kind when omitted."""

    @field_validator("kinds")
    @classmethod
    def _known(cls, kinds: list[str] | None) -> list[str] | None:
        known = {rule.kind for rule in catalogue()}
        unknown = sorted(set(kinds or ()) - known)
        if unknown:
            raise ValueError(f"unknown kinds {unknown}; known kinds: {sorted(known)}")
        return kinds


def spans(found: Iterable[tuple[str, tuple[int, int]]], order: dict[str, int]) -> Found:
    """The detector's matches as disjoint spans: where two overlap, the earlier one (the
    catalogue's earlier kind at the same start) names their union."""
    merged: list[tuple[int, int, str]] = []
    for kind, (start, end) in sorted(found, key=lambda hit: (hit[1][0], order[hit[0]])):
        if merged and start < merged[-1][1]:
            low, high, named = merged[-1]
            merged[-1] = (low, max(high, end), named)
        else:
            merged.append((start, end, kind))
    return tuple(merged)


def redacted(text: str, found: Found) -> str:
    pieces: list[str] = []
    done = 0
    for start, end, kind in found:
        pieces += (text[done:start], f"[REDACTED:{kind}]")
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


class RedactSecrets(TextRewriter[RedactSecretsOptions]):
    name = "redact_secrets"
    bypassable = False
    action = "redact"
    reaches_tool_inputs = True

    def setup(self) -> None:
        # Compiled here, at the chain's load (the gateway's init), once per process
        # and set of kinds: chains that choose the same kinds share one engine.
        self._detector: Detector = detector(self.options.kinds)
        self._order = {kind: index for index, kind in enumerate(self._detector.kinds)}
        # A partition per instance: a reloaded chain never reads an older one's entries.
        self.partition = f"{self._detector.version}:{os.urandom(8).hex()}"

    def scanned(self, text: str) -> Entry:
        found = spans(self._detector.find(text), self._order)
        if not found:
            return found, _NOTHING, ""
        # Read-only: the memo hands the same counts to every call that finds this text.
        counts = MappingProxyType(Counter(kind for _, _, kind in found))
        return found, counts, redacted(text, found)

    def rewrite(self, text: str) -> str:
        return self.rewrite_counted(text)[0]

    def rewrite_counted(
        self, text: str, caller: str | None = None
    ) -> tuple[str, Mapping[str, int]]:
        rewritten = self.rewrite_all((text,), caller)
        return (rewritten[0][1], rewritten[0][2]) if rewritten else (text, _NOTHING)

    def rewrite_all(self, texts: Sequence[str], caller: str | None = None) -> Rewritten:
        """Each text with something found, redacted; one memo loop over them all, and
        the texts with nothing found are not stepped through again."""
        if MEMO.max_bytes:
            entries = MEMO.remember_all(self.partition, caller, texts, self.scanned)
        else:
            entries = [self.scanned(text) for text in texts]
        return [(index, new, counts) for index, (found, counts, new) in enumerate(entries) if found]

    def rewriter(self, ctx: PolicyContext) -> Callable[[str], tuple[str, Mapping[str, int]]]:
        # The memo's partitions keep callers apart (detect/memo.py).
        return partial(self.rewrite_counted, caller=ctx.caller)

    def batch_rewriter(self, ctx: PolicyContext) -> Callable[[Sequence[str]], Rewritten]:
        return partial(self.rewrite_all, caller=ctx.caller)
