"""An AWS endpoint in front of the session's moto server that records and can stall.

Pointed at by `AWS_ENDPOINT_URL_<SERVICE>`, it forwards every call to moto
and records its operation (`X-Amz-Target`) with when it arrived and when it
was answered. `hold()` makes it behave as a stalled AWS endpoint does: it
accepts each request and answers nothing until `release()`. `throttle(share)`
makes it answer that share of the calls (drawn from a seeded sequence, so a
test's run repeats) as a throttled AWS does: 400 with ThrottlingException,
which botocore retries as it would AWS's.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio.to_thread
import httpx2
from policy_gateway import settings
from starlette.types import Receive, Scope, Send

from .servers import lifespan_handled

# How often a waiting test looks whether what it waits for has happened.
POLL_SECONDS = 0.01
# What AWS's JSON-protocol services (SSM among them) answer past their rate quota.
THROTTLED = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()


@dataclass
class AWSCall:
    operation: str
    received: float
    answered: float | None = None
    throttled: bool = False
    access_key_id: str | None = None
    """Whose credentials signed the call (from its SigV4 Authorization header)."""


def gateway_env(upstream_url: str, aws_url: str, **extra: str) -> dict[str, str]:
    """A gateway process's environment: the chain from SSM, SSM and Secrets Manager at `aws_url`."""
    return {
        settings.ENV_UPSTREAM_BASE_URL: upstream_url,
        settings.ENV_UPSTREAM_MAX_RETRIES: "0",
        settings.ENV_POLICY_CONFIG_PARAMETER: settings.DEFAULT_POLICY_CONFIG_PARAMETER,
        "AWS_ENDPOINT_URL_SSM": aws_url,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": aws_url,
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def wait_until(done: Callable[[], bool], timeout: float = 10.0) -> None:
    """Return once `done()` holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done after {timeout}s")
        time.sleep(POLL_SECONDS)


def signed_by(authorization: str) -> str | None:
    """The access key id in a SigV4 `Authorization` header (`... Credential=AKID/date/...`)."""
    _, found, rest = authorization.partition("Credential=")
    return rest.split("/", 1)[0] if found else None


class ContainerCredentials:
    """The credentials endpoint a SnapStart function gets (AWS_CONTAINER_CREDENTIALS_FULL_URI).

    botocore's container provider reads it; `access_key_id` is what it hands out
    next, so a test can rotate the credentials between a snapshot and a restore.
    """

    def __init__(self, access_key_id: str) -> None:
        self.access_key_id = access_key_id
        self.served = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await lifespan_handled(scope, receive, send):
            return
        self.served += 1
        body = json.dumps(
            {
                "AccessKeyId": self.access_key_id,
                "SecretAccessKey": "secret-" + self.access_key_id,
                "Token": "token-" + self.access_key_id,
                # Far off: a client built before the snapshot would never refresh by itself.
                "Expiration": "2099-01-01T00:00:00Z",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def env(self, url: str) -> dict[str, str]:
        """A process environment whose only AWS credentials are this endpoint's."""
        return {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": url,
            # Empty counts as unset for botocore's environment provider.
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_SESSION_TOKEN": "",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
            "AWS_CONFIG_FILE": "/nonexistent/config",
        }


class AWSProxy:
    """Forwards every request to `target` (moto); can hold them, unanswered, until released."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.calls: list[AWSCall] = []
        self._open = threading.Event()
        self._open.set()
        self._throttled_share = 0.0
        self._draws = random.Random(34)

    @property
    def operations(self) -> list[str]:
        return [call.operation for call in self.calls]

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def throttle(self, share: float) -> None:
        """Answer `share` of the calls from now on ThrottlingException (0: none, 1: all)."""
        self._throttled_share = share

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k != b"host"}
        call = AWSCall(
            headers.get("x-amz-target", "?"),
            time.monotonic(),
            access_key_id=signed_by(headers.get("authorization", "")),
        )
        self.calls.append(call)
        if self._draws.random() < self._throttled_share:
            call.throttled = True
            call.answered = time.monotonic()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/x-amz-json-1.1")],
                }
            )
            await send({"type": "http.response.body", "body": THROTTLED})
            return
        # Abandoned if the server shuts down first; the thread is a daemon, as
        # the server's is, and ends at release().
        await anyio.to_thread.run_sync(self._open.wait, abandon_on_cancel=True)
        async with httpx2.AsyncClient() as client:
            answer = await client.post(self.target + scope["path"], content=body, headers=headers)
        call.answered = time.monotonic()
        await send(
            {
                "type": "http.response.start",
                "status": answer.status_code,
                "headers": [
                    (k.encode(), v.encode())
                    for k, v in answer.headers.items()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection")
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer.content})
