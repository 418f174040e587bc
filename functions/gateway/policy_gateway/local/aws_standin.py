"""The embedded AWS stand-in's server: moto, answering the AWS SDKs on this machine and
nothing a web page can send.

Loopback is no boundary against a browser: any page the developer opens can
send requests to 127.0.0.1. moto as it ships grants CORS to every origin and
checks no signature, so a page could read the Anthropic key `init --secrets`
stores and the gateway keys, and rewrite the chain and the flag. Before moto
sees a request, it must carry:

- a SigV4-shaped `Authorization`: every AWS SDK signs, and a page can attach
  that header only after a CORS preflight, which this refuses like every
  request without one. The signature itself is not checked: the SDKs sign
  with whatever credentials their environment holds, and a page cannot send
  the header at all;
- a `Host` naming the stand-in's own address (127.0.0.1 or localhost, on its
  port): after a DNS rebinding a page's requests are same-origin to it and
  may carry any header, but their Host is still the page's own name;
- no mark of a page (auth/web_pages.py), the gateway's own rule.

No response carries an `Access-Control-*` header. A refusal is a 403 in AWS's
JSON error shape, which boto3 raises as a ClientError `AccessDeniedException`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..auth.web_pages import loopback_hosts, made_by_a_web_page
from .listen import LOOPBACK, claim

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

SSM_PORT_OPTION = "--embedded-ssm-port, or make run SSM_PORT=..."
_SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=[^/\s,]+(?:/[^/\s,]+){3}/aws4_request,\s*"
    r"SignedHeaders=[a-z0-9-]+(?:;[a-z0-9-]+)*,\s*Signature=[0-9a-f]{64}"
)
_DENIED = "AccessDeniedException"
# On every answer moto gives here: an operator command told "no such stack" by this stand-in
# says that --stack needs a deployed stack, not to check the stack's name.
STAND_IN_HEADER = "x-policy-gateway-stand-in"


def _error(message: str) -> tuple[str, list[tuple[str, str]], bytes]:
    body = json.dumps({"__type": _DENIED, "message": message}).encode()
    headers = [
        ("Content-Type", "application/x-amz-json-1.1"),
        ("x-amzn-ErrorType", _DENIED),
        ("Content-Length", str(len(body))),
    ]
    return "403 Forbidden", headers, body


class _NoCORSGrant:
    """moto's start_response without the Access-Control-* headers it would add, and with
    STAND_IN_HEADER."""

    def __init__(self, start_response: StartResponse) -> None:
        self._start_response = start_response

    def __call__(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
        return self._start_response(status, [*kept, (STAND_IN_HEADER, "make run")], exc_info)


class SignedLocalOnly:
    """WSGI middleware in front of moto: the refusals above, else moto without CORS."""

    def __init__(self, app: WSGIApplication, port: int) -> None:
        self._app = app
        self._port = port
        self._hosts = loopback_hosts(LOOPBACK, port)

    def refusal(self, environ: WSGIEnvironment) -> str | None:
        """Why the request is refused, or None to serve it."""
        if made_by_a_web_page(environ.get("HTTP_ORIGIN"), environ.get("HTTP_SEC_FETCH_SITE")):
            return "The embedded AWS stand-in answers no web page."
        if environ.get("HTTP_HOST", "").lower() not in self._hosts:
            return (
                f"The embedded AWS stand-in answers only for Host {LOOPBACK}:{self._port} "
                f"or localhost:{self._port}."
            )
        if not _SIGV4.fullmatch(environ.get("HTTP_AUTHORIZATION", "")):
            return "The embedded AWS stand-in answers only SigV4-signed requests (the AWS SDKs)."
        return None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        refused = self.refusal(environ)
        if refused is None:
            return self._app(environ, _NoCORSGrant(start_response))
        status, headers, body = _error(refused)
        start_response(status, headers)
        return [body]


def serve(port: int) -> None:
    """moto behind SignedLocalOnly on LOOPBACK:port, in a daemon thread, answering at return.

    Raises PortInUse (a SystemExit) if the port is held, before anything starts.
    """
    listener = claim("embedded SSM", LOOPBACK, port, SSM_PORT_OPTION)
    try:
        with warnings.catch_warnings():
            # requests, which moto imports, warns that the locked urllib3 is newer
            # than the range it was released against: nothing of the gateway's.
            warnings.filterwarnings("ignore", message="urllib3 .* doesn't match a supported")
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )
        from werkzeug.serving import make_server
    except ImportError:
        listener.close()
        raise SystemExit(
            "--embedded-ssm needs moto: install the local run's lock (make run does)"
        ) from None
    # moto's web server logs every request; the gateway's own lines are what matter here.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with listener:
        listener.listen()
        # werkzeug serves a duplicate of the socket, bound and listening before it returns.
        server = make_server(
            LOOPBACK,
            port,
            SignedLocalOnly(DomainDispatcherApplication(create_backend_app), port),
            threaded=True,
            request_handler=MotoRequestHandler,
            fd=listener.fileno(),
        )
    threading.Thread(target=server.serve_forever, daemon=True, name="embedded AWS").start()
