"""`policy-gateway history`: recorded conversations, read with the operator's credentials.

    policy-gateway history list [--caller C] [--since 2h|DATE] [--with blocked|redacted|fallback]
    policy-gateway history show CONVERSATION_OR_CALL_ID
    policy-gateway history serve [--host 127.0.0.1] [--port 8089]
    policy-gateway history delete --caller C [--before DATE]

The store is the gateway's: RECORDS_BUCKET (with the standard AWS environment,
AWS_ENDPOINT_URL_S3 for a stand-in), else RECORDS_DIR; `--bucket` or `--dir`
name another. The Lambda function never serves records: reading them takes
the operator's own right to read the bucket (docs/operations.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from .. import settings
from ..records import layout
from ..records.archive import MARKS, Archive, call_marks
from ..records.store import RecordStore, open_store
from ..records.transcript import ACTION, ERROR, NOTE, transcript
from .history_filters import first_words, selected, since_epoch, stamp
from .operator_errors import OperatorError

DEFAULT_VIEWER_PORT = 8089


def store_of(args: argparse.Namespace) -> RecordStore:
    config = settings.Settings.from_env()
    store = open_store(
        args.bucket or (None if args.dir else config.records_bucket),
        args.dir or config.records_dir,
    )
    if store is None:
        raise OperatorError(
            "no record store is named",
            f"set {settings.ENV_RECORDS_BUCKET} or {settings.ENV_RECORDS_DIR} as the gateway "
            "has them, or pass --bucket or --dir",
            exit_code=2,
        )
    return store


def list_command(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    found = Archive(store_of(args)).load(args.caller)
    shown = selected(found, since_epoch(args.since, time.time()), args.with_marks)
    for conversation in shown:
        marks = ",".join(sorted(conversation.marks())) or "-"
        out.write(
            f"{conversation.id}  {stamp(conversation.updated)}  {conversation.caller}  "
            f"{len(conversation.calls)} calls  {conversation.branches} branches  {marks}  "
            f"{first_words(conversation)}\n"
        )
    if not shown:
        out.write("no recorded conversation matches\n")
    return 0


_LABELS = {ACTION: "  >> policy", NOTE: "  -- note", ERROR: "  !! error"}


def show_command(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    archive = Archive(store_of(args))
    found = archive.find(args.target, archive.load())
    if found is None:
        raise OperatorError(
            f"no recorded conversation or call {args.target!r}",
            "list them with `policy-gateway history list`",
        )
    conversation, through = found
    out.write(
        f"conversation {conversation.id}  caller {conversation.caller}  "
        f"{len(conversation.calls)} calls  {conversation.branches} branches\n"
    )
    call_id = None
    for entry in transcript(conversation, through):
        if entry.call_id != call_id:
            call_id = entry.call_id
            call = next(c for c in conversation.calls if c.call_id == call_id)
            out.write(f"\n== call {call_id}  {stamp(call.time)}  {_call_summary(call)}\n")
        label = _LABELS.get(entry.kind, entry.kind)
        out.write(f"{label}: {entry.text}\n")
    return 0


def _call_summary(call: layout.CallRecord) -> str:
    meta = call.meta
    parts = [f"status {meta.get('status')}", "stream" if meta.get("stream") else "json"]
    parts.append(f"chain {meta.get('chain')} {meta.get('chain_version')}")
    marks = call_marks(call)
    if marks:
        parts.append(",".join(sorted(marks)))
    return "  ".join(parts)


def delete_command(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    store = store_of(args)
    before = since_epoch(args.before, time.time())
    prefix = f"{layout.caller_prefix(args.caller)}/"
    doomed = [obj.key for obj in store.list(prefix) if before is None or obj.modified < before]
    store.delete(doomed)
    scope = "" if before is None else f" written before {stamp(before)}"
    out.write(
        f"deleted {len(doomed)} objects of caller {args.caller}{scope} from {store.location}\n"
    )
    return 0


def serve_command(args: argparse.Namespace) -> int:
    from .history_page import serve_viewer

    return serve_viewer(store_of(args), args.host, args.port)


def register(commands: Any) -> None:
    history = commands.add_parser(
        "history", help="recorded conversations: list, show, serve (a local page), delete"
    )
    actions = history.add_subparsers(dest="history_action", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
        parser.add_argument(
            "--bucket", help=f"the records bucket (default {settings.ENV_RECORDS_BUCKET})"
        )
        parser.add_argument(
            "--dir", help=f"the records folder (default {settings.ENV_RECORDS_DIR})"
        )
        return parser

    listing = command("list", "list recorded conversations, latest first")
    listing.add_argument("--caller", help="only this caller's")
    listing.add_argument("--since", help="active since: a duration (2h, 1d) or a date")
    listing.add_argument(
        "--with",
        dest="with_marks",
        action="append",
        choices=MARKS,
        help="only conversations where a call was blocked, redacted or fell back (repeatable)",
    )
    listing.set_defaults(handler=list_command)
    showing = command("show", "print one conversation turn by turn, policy actions in place")
    showing.add_argument("target", help="a conversation id (or its first characters) or a call id")
    showing.set_defaults(handler=show_command)
    serving = command("serve", "a read-only page of the records on loopback")
    serving.add_argument(
        "--host", default="127.0.0.1", help="a loopback address (default %(default)s)"
    )
    serving.add_argument(
        "--port", type=int, default=DEFAULT_VIEWER_PORT, help="(default %(default)s)"
    )
    serving.set_defaults(handler=serve_command)
    deleting = command("delete", "delete a caller's records (all, or those written before a date)")
    deleting.add_argument("--caller", required=True, help="whose records")
    deleting.add_argument("--before", help="only those written before: a date, or a duration ago")
    deleting.set_defaults(handler=delete_command)
