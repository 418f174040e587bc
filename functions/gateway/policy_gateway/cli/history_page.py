"""`policy-gateway history serve`: the records as a read-only page, on loopback only.

Three views, all GET, rendered on the server with every recorded word escaped
and no script at all (the Content-Security-Policy forbids any): the list of
conversations with filters (caller, blocked / redacted / fallback, since),
one conversation turn by turn with each policy action where it happened (a
branch links to its other versions), and the same conversation live
(`?live=1`: it reloads every `LIVE_SECONDS`, reading only records that landed
since). It answers only a Host naming the loopback address it listens on and
refuses what another page asks of it (auth/web_pages.py, as `serve` does),
while its own links (`Sec-Fetch-Site: same-origin`) work.
"""

from __future__ import annotations

import html
import time
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from ..auth.web_pages import RefuseWebPages, loopback_hosts
from ..records import layout
from ..records.archive import MARKS, Archive, Conversation, call_marks
from ..records.store import RecordStore
from ..records.transcript import transcript
from .commands import say
from .history_filters import first_words, selected, since_epoch, stamp
from .operator_errors import OperatorError

LIVE_SECONDS = 2
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 20px}header a{color:#fff}
main{padding:16px 20px;max-width:1100px}
table{border-collapse:collapse;width:100%;background:#fff}
td,th{padding:6px 8px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
.mark{display:inline-block;padding:1px 6px;border-radius:8px;font-size:12px;margin-right:4px}
.blocked{background:#fde2e1;color:#8a1c17}.redacted{background:#fff1c2;color:#6b5200}
.fallback{background:#dde9ff;color:#1b3d80}
section.call{background:#fff;border:1px solid #e3e6eb;border-radius:6px;margin:12px 0;
padding:8px 12px}
section.call h3{font-size:13px;color:#5b6475;margin:2px 0 8px}
.entry{margin:6px 0;display:flex;gap:10px}
.who{min-width:130px;font-weight:600;color:#5b6475}
.entry pre{margin:0;white-space:pre-wrap;word-break:break-word;font:13px/1.4 ui-monospace,monospace}
.entry.user .who{color:#0b6b3a}.entry.assistant .who{color:#4b2aa8}
.entry.policy{background:#fff4e5;border-left:4px solid #e08a00;padding:4px 8px}
.entry.error{background:#fde2e1;border-left:4px solid #c0392b;padding:4px 8px}
.entry.note{color:#5b6475;font-style:italic}
form{margin:0 0 12px}label{margin-right:12px}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, refresh: bool = False) -> HTMLResponse:
    meta = f'<meta http-equiv="refresh" content="{LIVE_SECONDS}">' if refresh else ""
    document = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f'<header><a href="/">Policy Gateway records</a> · {_e(title)}</header>'
        f"<main>{body}</main></body></html>"
    )
    return HTMLResponse(document, headers=_HEADERS)


def _marks(marks: set[str]) -> str:
    return "".join(f'<span class="mark {m}">{m}</span>' for m in sorted(marks))


class Viewer:
    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.archive = Archive(store)

    async def conversations(self, request: Request) -> HTMLResponse:
        query = request.query_params
        caller = query.get("caller") or None
        marks = [m for m in query.getlist("with") if m in MARKS]
        since_text = query.get("since") or ""
        try:
            since = since_epoch(since_text, time.time())
        except OperatorError as exc:
            return _page("Conversations", f"<p>{_e(exc)}</p>")
        found = selected(self.archive.load(caller), since, marks)
        callers = "".join(
            f'<option value="{_e(c)}"{" selected" if c == caller else ""}>{_e(c)}</option>'
            for c in self.archive.callers()
        )
        boxes = "".join(
            f'<label><input type="checkbox" name="with" value="{m}"'
            f"{' checked' if m in marks else ''}> {m}</label>"
            for m in MARKS
        )
        rows = "".join(self._row(conversation) for conversation in found)
        body = (
            f"<p>{len(found)} conversation(s) in {_e(self.store.location)}</p>"
            '<form method="get" action="/">'
            f'<label>caller <select name="caller"><option value="">any</option>{callers}'
            f"</select></label>{boxes}"
            f'<label>since <input name="since" value="{_e(since_text)}" size="10" '
            'placeholder="2h, 2026-12-01"></label><button>filter</button></form>'
            "<table><tr><th>conversation</th><th>last call</th><th>caller</th><th>calls</th>"
            f"<th>branches</th><th>policy actions</th><th>first words</th></tr>{rows}</table>"
        )
        return _page("Conversations", body)

    def _row(self, conversation: Conversation) -> str:
        link = f"/c/{quote(conversation.id)}"
        return (
            f'<tr class="conversation"><td><a href="{link}">{_e(conversation.id)}</a></td>'
            f"<td>{stamp(conversation.updated)}</td><td>{_e(conversation.caller)}</td>"
            f"<td>{len(conversation.calls)}</td><td>{conversation.branches}</td>"
            f"<td>{_marks(conversation.marks())}</td><td>{_e(first_words(conversation))}</td></tr>"
        )

    async def conversation(self, request: Request) -> HTMLResponse:
        wanted = request.path_params["conversation"]
        live = request.query_params.get("live") == "1"
        call_id = request.query_params.get("call")
        found = self.archive.find(call_id or wanted, self.archive.load())
        if found is None:
            return _page("Not found", f"<p>No recorded conversation {_e(wanted)}.</p>")
        conversation, through = found
        title = f"Conversation {conversation.id}"
        sections: list[str] = []
        current: list[str] = []
        call_id_now: str | None = None
        for entry in transcript(conversation, through):
            if entry.call_id != call_id_now:
                if current:
                    sections.append("".join(current) + "</section>")
                call_id_now = entry.call_id
                call = next(c for c in conversation.calls if c.call_id == entry.call_id)
                current = [self._call_head(conversation, call)]
            current.append(
                f'<div class="entry {entry.kind.replace(" ", "-")}"><span class="who">'
                f"{_e(entry.kind)}</span><pre>{self._linked(conversation, entry.text)}</pre></div>"
            )
        if current:
            sections.append("".join(current) + "</section>")
        toggle = (
            f'<a href="?{urlencode({"call": call_id} if call_id else {})}">stop live view</a>'
            if live
            else f'<a href="?{urlencode({**({"call": call_id} if call_id else {}), "live": "1"})}">'
            "live view</a>"
        )
        status = f" · live: refreshes every {LIVE_SECONDS} s" if live else ""
        body = (
            f"<p>caller <b>{_e(conversation.caller)}</b> · {len(conversation.calls)} calls · "
            f"{conversation.branches} branches · last call {stamp(conversation.updated)}"
            f"{status} · {toggle}</p>{''.join(sections)}"
        )
        return _page(title, body, refresh=live)

    def _call_head(self, conversation: Conversation, call: layout.CallRecord) -> str:
        meta: dict[str, Any] = call.meta
        kind = "stream" if meta.get("stream") else "json"
        return (
            f'<section class="call" id="call-{_e(call.call_id)}"><h3>call {_e(call.call_id)} · '
            f"{stamp(call.time)} · status {_e(meta.get('status'))} · {kind} · chain "
            f"{_e(meta.get('chain'))} {_e(meta.get('chain_version'))} "
            f"{_marks(call_marks(call))}</h3>"
        )

    def _linked(self, conversation: Conversation, text: str) -> str:
        """The text escaped; the call ids a branch note names become links to them."""
        escaped = _e(text)
        for call in conversation.calls:
            if call.call_id in text and text.startswith("branch:"):
                target = f"/c/{quote(conversation.id)}?call={quote(call.call_id)}"
                escaped = escaped.replace(
                    _e(call.call_id), f'<a href="{target}">{_e(call.call_id)}</a>'
                )
        return escaped


def viewer_app(store: RecordStore, host: str, port: int) -> Any:
    """The page's ASGI app, guarded for the loopback `host`:`port` it answers on."""
    hosts = loopback_hosts(host, port)
    if not hosts:
        raise OperatorError(
            f"history serve listens on loopback only, not {host!r}",
            "use --host 127.0.0.1 (or ::1, localhost) and reach it from this machine",
            exit_code=2,
        )
    viewer = Viewer(store)
    app = Starlette(
        routes=[
            Route("/", viewer.conversations, methods=["GET"]),
            Route("/c/{conversation}", viewer.conversation, methods=["GET"]),
        ]
    )
    return RefuseWebPages(app, hosts, frozenset(f"http://{name}" for name in hosts))


def serve_viewer(store: RecordStore, host: str, port: int) -> int:
    import uvicorn

    from ..local.listen import claim

    app = viewer_app(store, host, port)
    listener = claim("history page", host, port, "--port")
    say(f"records of {store.location} on http://{host}:{port} (read-only; Ctrl-C stops)")
    uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    ).run(sockets=[listener])
    return 0
