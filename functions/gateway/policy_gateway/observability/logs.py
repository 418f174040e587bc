"""Structured JSON logs (Powertools Logger) with a per-call correlation id.

A call's ids live in a context variable that a logging filter copies onto
every record, so concurrent calls in one process (a local server, the load
tests) never mix or strip each other's ids. (Powertools' own context keys sit
in one dict shared by every task.) Only ids, statuses, paths and sizes are
logged: never request content or credentials. Every line goes through the
audit record's bounds (gateway_policies.recorder.line): one JSON object under
256 KB, whatever a client or an upstream managed to put into it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from gateway_policies import recorder

from .. import settings

_call_keys: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("call_keys", default=())


class _CallKeys(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _call_keys.get():
            setattr(record, key, value)
        return True


logger = Logger(service=settings.service_name(), use_rfc3339=True, json_serializer=recorder.line)
# On the handler, not the logger, so the policies' loggers below get the keys too.
logger.registered_handler.addFilter(_CallKeys())

# Policies log through the stdlib, since they never import the gateway. Giving
# their logger ours makes their lines the same JSON on stdout, with the call's
# keys, instead of bare text from logging's last-resort handler on stderr.
logging.getLogger("gateway_policies")
copy_config_to_registered_loggers(source_logger=logger, include={"gateway_policies"})


def bind_call_key(key: str, value: str) -> None:
    """Add one key to the rest of the current call's log lines (e.g. the caller, once known).

    `call_context`'s exit restores what was there before it, this key included.
    """
    _call_keys.set((*_call_keys.get(), (key, value)))


@contextmanager
def call_context(**keys: str) -> Iterator[None]:
    """Add `keys` to every log line of the current call (the current asyncio task)."""
    token = _call_keys.set(tuple(keys.items()))
    try:
        yield
    finally:
        _call_keys.reset(token)
