"""Structured JSON logs (Powertools Logger) with a per-call correlation id.

Keys added for a call live in a context variable, so concurrent calls in one
process (a local server, the load tests) never mix their ids. Only ids,
statuses, paths and sizes are logged: never request content or credentials.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger

from . import settings

logger = Logger(service=settings.SERVICE_NAME, use_rfc3339=True)
