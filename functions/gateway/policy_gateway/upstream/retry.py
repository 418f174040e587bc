"""When an upstream attempt is tried again, and after how long: the anthropic SDK's rules.

408, 409, 429 and 5xx are retried, `x-should-retry` overrides the status,
and `retry-after-ms` / `retry-after` are honoured within the SDK's range;
otherwise the wait is exponential backoff with jitter.
"""

from __future__ import annotations

import email.utils
import random
import time

import httpx2

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 60.0


def should_retry(status: int, headers: httpx2.Headers) -> bool:
    explicit = headers.get("x-should-retry")
    if explicit == "true":
        return True
    if explicit == "false":
        return False
    return status in (408, 409, 429) or status >= 500


def _retry_after(headers: httpx2.Headers) -> float | None:
    """The wait the upstream asked for: the first of `retry-after-ms`, `retry-after` that parses."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            parsed = email.utils.parsedate_tz(value) if scale == 1.0 else None
            if parsed is not None:
                return float(email.utils.mktime_tz(parsed) - time.time())
    return None


def retry_delay(retry: int, headers: httpx2.Headers | None) -> float:
    # As the SDK has done: a wait outside (0, 60] s is ignored for the normal
    # backoff, so an upstream (or a proxy) cannot park a call for minutes.
    asked = None if headers is None else _retry_after(headers)
    if asked is not None and 0 < asked <= MAX_RETRY_AFTER:
        return asked
    backoff = min(INITIAL_RETRY_DELAY * 2.0**retry, MAX_RETRY_DELAY)
    return backoff * (1 - 0.25 * random.random())
