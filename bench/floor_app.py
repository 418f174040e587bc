"""The cold-start floor: a bare uvicorn app that only answers GET /healthz.

It pays for the interpreter, uvicorn and the socket and nothing else, so the
gateway's cold start is judged by what it adds on top of this.

    python bench/floor_app.py PORT
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn

Scope = dict[str, Any]


async def app(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    found = scope["path"] == "/healthz"
    body = b'{"status":"ok"}' if found else b"{}"
    await send(
        {
            "type": "http.response.start",
            "status": 200 if found else 404,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
