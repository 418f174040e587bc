"""The request a call prepared: the original, what the chain made of it, and how."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway_policies import JSONObject, PolicyChain, PolicyContext

_UNPARSED = object()

Dump = Callable[[JSONObject], bytes]
"""How a changed document goes on the wire (routes/body.py's `dump_json`)."""


class PreparedRequest:
    """The request a call prepared, before any attempt, and what the ladder's rungs made of it.

    The original is parsed at most once for the record, and only on the error
    path; the fallback's record then replays the request hooks on that same
    parse. A repair or a narrow fallback each parse once more, also only on
    the error path.
    """

    def __init__(
        self,
        original: bytes,
        sent: bytes,
        modified: object,
        chain: PolicyChain,
        ctx: PolicyContext,
        dump: Dump,
    ) -> None:
        self.original = original
        self.sent = sent
        self.modified = modified
        self.chain = chain
        self.ctx = ctx
        self.dump = dump
        self._document: Any = _UNPARSED

    def document(self) -> Any:
        if self._document is _UNPARSED:
            self._document = json.loads(self.original)
        return self._document

    def repaired(self, request: JSONObject) -> None:
        """From now on, `request` is what the chain made: what is sent and compared."""
        self.modified = request
        self.sent = self.dump(request)

    async def differs(self) -> bool:
        if self.sent is self.original:
            return False
        try:
            return bool(self.document() != self.modified)
        except RecursionError:
            # Too deep to compare here; a request hook did run on it, and
            # resending the original costs one call, not a weakened policy.
            return True
