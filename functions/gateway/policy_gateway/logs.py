"""Structured JSON logs (Powertools Logger) with a per-call correlation id.

Keys added for a call live in a context variable, so concurrent calls in one
process (a local server, the load tests) never mix their ids. Only ids,
statuses, paths and sizes are logged: never request content or credentials.
"""

from __future__ import annotations

import logging

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from . import settings

logger = Logger(service=settings.SERVICE_NAME, use_rfc3339=True)

# Policies log through the stdlib, since they never import the gateway. Giving
# their logger ours makes their lines the same JSON on stdout, with the call's
# keys, instead of bare text from logging's last-resort handler on stderr.
logging.getLogger("gateway_policies")
copy_config_to_registered_loggers(source_logger=logger, include={"gateway_policies"})
