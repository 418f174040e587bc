"""Figure (16): how long after `policy set` a change is in force, under load (issue 34).

One gateway reads its chain from an SSM parameter (moto) with a short TTL
while client threads keep it busy. Each round writes the other of two chains
(what `policy-gateway policy set` does: a new version of the parameter) and
watches the calls: under the `string_replace` chain the stub rejects the
rewritten text (x-bench-reject), so a call's status tells which version ran
it. The figure is the start of the last call that still ran the old version,
counted from the write: the promise is TTL + 1 s.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from policy_gateway import settings

from .harness import HOST, MESSAGES, Environment, free_port, gateway_args, running
from .report import Figure
from .wire import Connection
from .workload import NOOP_CHAIN, REPLACE_CHAIN, REWRITTEN, request_body

PARAMETER = "/bench/propagation-chain"
TTL = 5.0
CLIENTS = 4
ROUNDS = 4
REJECT = {"x-bench-reject": REWRITTEN}
# Status of a call by the chain that ran it: the stub rejects only the rewrite.
STATUS = {NOOP_CHAIN: 200, REPLACE_CHAIN: 400}


class Load:
    """Client threads posting back to back; each call recorded as (started, status)."""

    def __init__(self, port: int) -> None:
        self.calls: list[tuple[float, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(port,)) for _ in range(CLIENTS)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, port: int) -> None:
        connection = Connection(HOST, port)
        body = request_body(1024)
        while not self._stop.is_set():
            started = time.monotonic()
            status = connection.post(MESSAGES, body, REJECT).status
            with self._lock:
                self.calls.append((started, status))

    def since(self, moment: float) -> list[tuple[float, int]]:
        with self._lock:
            return [call for call in self.calls if call[0] >= moment]


def propagation(env: Environment, raw: dict[str, Any]) -> list[Figure]:
    ssm = env.client("ssm")
    ssm.put_parameter(Name=PARAMETER, Value=NOOP_CHAIN, Type="String", Overwrite=True)
    gateway = env.gateway_env(NOOP_CHAIN)
    del gateway[settings.ENV_POLICY_CONFIG]
    gateway[settings.ENV_POLICY_CONFIG_PARAMETER] = PARAMETER
    gateway[settings.ENV_POLICY_CONFIG_TTL] = str(TTL)
    gateway[settings.ENV_FLAG_TTL] = str(TTL)
    port = free_port()
    last_old: list[float] = []
    first_new: list[float] = []
    with running(gateway_args(port), gateway, "propagation.log", port), Load(port) as load:
        time.sleep(TTL)  # warm, and mid-TTL when the first write lands
        chain = NOOP_CHAIN
        for _ in range(ROUNDS):
            chain = REPLACE_CHAIN if chain == NOOP_CHAIN else NOOP_CHAIN
            ssm.put_parameter(Name=PARAMETER, Value=chain, Type="String", Overwrite=True)
            written = time.monotonic()
            time.sleep(TTL * 2)
            calls = load.since(written)
            new = [started for started, status in calls if status == STATUS[chain]]
            old = [started for started, status in calls if status != STATUS[chain]]
            first_new.append(min(new) - written)
            last_old.append((max(old) - written) if old else 0.0)
        served = len(load.calls)
    worst = max(last_old)
    raw["propagation"] = {
        "ttl_s": TTL,
        "clients": CLIENTS,
        "calls": served,
        "last_old_s": last_old,
        "first_new_s": first_new,
    }
    return [
        Figure(
            f"(16) policy set -> in force, TTL {TTL:.0f} s, {CLIENTS} busy clients",
            worst,
            "s",
            f"<= TTL + 1 = {TTL + 1:.0f} s",
            worst <= TTL + 1,
            f"last old-version call started at {', '.join(f'{s:.2f}' for s in last_old)} s; "
            f"first new-version call at {', '.join(f'{s:.2f}' for s in first_new)} s; "
            f"{served} calls",
        )
    ]
