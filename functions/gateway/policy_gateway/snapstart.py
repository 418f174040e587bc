"""SnapStart's two moments, as the Lambda Web Adapter announces them (adapter >= v1.1.0).

With SnapStart, Lambda snapshots the function's memory once per published
version, after init, and resumes new execution environments from that
snapshot: hours or days later, and many of them at once. The adapter, not
this process, talks to the runtime: it POSTs an empty body to
AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH before the snapshot and to
AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH after a restore, then runs its readiness
check (/healthz) again before it admits traffic. A non-2xx answer fails the
phase: Lambda then takes no snapshot, or discards the restored environment.

Before the checkpoint nothing that cannot survive the snapshot stays open:
the upstream pools and the AWS clients' connections are closed, and telemetry
still buffered is written out. After a restore nothing from the snapshot is
trusted that could be stale or shared: `random` is re-seeded from the
kernel's entropy (trace and span ids come from it; call ids already come
from os.urandom), the AWS clients and boto3's default session are dropped so
new ones resolve credentials from the runtime's provider, the upstream client
and the fallback budget's counters are new, unflushed metrics are dropped,
and the flag, the chain and the secrets are read again, each waited for in
full, before /healthz is ready again (a value held from the snapshot serves
only if its re-read fails, as `parameters.TTLCache` says). Until then
/healthz answers 503 and a call waits; a restore that fails leaves the
gateway unready and the hook answers 503.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from . import aws_reads, parameters
from .fallback import budget
from .fallback.budget_table import DynamoDBStore
from .fallback.send import Fallback
from .limits import limiter
from .observability import metrics, tracing
from .observability.logs import logger
from .upstream.client import UpstreamClient

if TYPE_CHECKING:
    from .routes.gateway import Gateway


async def before_checkpoint(gateway: Gateway) -> Gateway:
    """Close what must not be in the snapshot; the gateway left holds no connection."""
    await gateway.upstream.aclose()
    store = gateway.fallback.budget.store
    if isinstance(store, DynamoDBStore):
        store.close()
    # What the warm-up counted goes in now: a snapshot seeds many environments, and
    # each would otherwise report it again (and spend the same leases).
    await gateway.limits.flush()
    gateway.limits.close()
    aws_reads.drop_clients()
    metrics.flush()
    tracing.flush()
    logger.info("snapshot hook done: connections closed, telemetry flushed")
    return replace(gateway, upstream=UpstreamClient(gateway.config))


async def after_restore(gateway: Gateway, clock: Callable[[], float]) -> Gateway:
    """The gateway to serve after a restore; `clock` decides the new budget's window."""
    # From os.urandom: each restored environment gets its own sequence.
    random.seed()
    aws_reads.drop_clients()
    _forget_default_boto3_session()
    parameters.expire_all()
    metrics.discard()
    if gateway.records is not None:
        gateway.records.store.reset()
    await gateway.upstream.aclose()
    config = gateway.config
    restored = replace(
        gateway,
        upstream=UpstreamClient(config),
        fallback=Fallback(gateway.fallback.flag, budget.from_settings(config, clock)),
        # No lease survives a snapshot: each restored environment takes its own.
        limits=limiter.limiter(config, clock),
    )
    await restored.warm()
    logger.info("restore hook done: values re-read, clients rebuilt, randomness re-seeded")
    return restored


def _forget_default_boto3_session() -> None:
    # boto3.client() reuses a module-level session whose credentials were
    # resolved before the snapshot. Looked up, never imported: on the
    # Anthropic path nothing may have loaded boto3 yet.
    if "boto3" in sys.modules:
        import boto3

        boto3.DEFAULT_SESSION = None
