"""The request-path floor of (13): the least a relay on the gateway's stack can add.

A bare uvicorn app that relays each POST to the upstream with httpx2, as the
gateway does, and does only what a relay that rewrites a JSON body cannot
skip: it reads the body, parses it (orjson, checking that the document writes
back byte for byte, as the gateway's parse does), serializes it again, sends
it and hands the answer back. No credentials, no policies, no worker thread,
no logs, metrics or traces. What the gateway adds over direct access is judged
against what this adds: a 1 MB turn pays twice its transfer through a relay.

    python bench/relay_floor.py PORT UPSTREAM_URL
"""

from __future__ import annotations

import sys
from typing import Any

import httpx2
import orjson
import uvicorn

Scope = dict[str, Any]
FORWARDED = ("content-type", "x-api-key", "anthropic-version")


class Relay:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.client: httpx2.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                self.client = httpx2.AsyncClient()
                await send({"type": "lifespan.startup.complete"})
            assert self.client is not None
            await self.client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        assert self.client is not None
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        document = orjson.loads(body)
        if orjson.dumps(document) != body:
            raise ValueError("the floor relays only bodies written as orjson writes them")
        headers = {
            name.decode(): value.decode()
            for name, value in scope["headers"]
            if name.decode() in FORWARDED
        }
        answer = await self.client.post(
            self.upstream + scope["path"], content=orjson.dumps(document), headers=headers
        )
        await send(
            {
                "type": "http.response.start",
                "status": answer.status_code,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": answer.content})


if __name__ == "__main__":
    uvicorn.run(
        Relay(sys.argv[2]),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
    )
