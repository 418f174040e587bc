"""A conversation read for provenance: its trusted text and its untrusted results.

Trusted text is what the operator and the user wrote: the system prompt and
the user-role text (strings and `text` blocks; a `tool_result` is not the
user's). Untrusted results are the `tool_result` blocks of the tools the
operator names untrusted (and of the client's MCP tools, `mcp__…`), and every
result of a call the API made itself (`web_search_tool_result`,
`web_fetch_tool_result`, `mcp_tool_result`, …), in the request or earlier in
the answer. A result's text is every string inside it at any depth, nested
results included, except the names of its structure (types, ids).

What the gateway cannot read (encrypted search content, images, PDFs and other
binary documents) is noted: a value from it cannot be traced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .candidates import Candidate
from .hosts import BOUNDARIES, Boundary
from .lookup import finder

CLIENT_MCP_PREFIX = "mcp__"
"""Claude Code's name for the tools of the MCP servers it runs itself."""

_STRUCTURE = frozenset({"type", "id", "tool_use_id", "cache_control", "media_type"})
_OPAQUE_KEYS = ("encrypted_content", "encrypted_index")
_READABLE_SOURCES = ("text", "content")
_SEPARATOR = "\x00"
"""Between trusted texts: normal forms never hold one (normalise drops it)."""


@dataclass(frozen=True)
class Result:
    """One untrusted result: its `tool_use_id`, its text in searchable form, and whether
    some of it could not be read."""

    id: str
    text: str
    unreadable: bool


def is_upstream_result(block: Any) -> bool:
    """A result of a call the API made itself (a server tool's, an MCP connector's)."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    return isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result"


def _opaque(node: dict[str, Any]) -> bool:
    if node.get("type") == "image" or any(key in node for key in _OPAQUE_KEYS):
        return True
    source = node.get("source")
    return (
        node.get("type") == "document"
        and isinstance(source, dict)
        and source.get("type") not in _READABLE_SOURCES
    )


def _strings(block: dict[str, Any]) -> tuple[list[str], bool]:
    """Every string inside a result block but its structure's names, and whether any
    part of it is opaque. Iterative: a result may nest deeper than Python recurses."""
    texts: list[str] = []
    unreadable = False
    stack: list[Any] = [block.get("content")]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            texts.append(node)
        elif isinstance(node, list):
            stack.extend(reversed(node))
        elif isinstance(node, dict):
            if _opaque(node):
                unreadable = True
                if node.get("type") in ("image", "document"):
                    continue
            stack.extend(
                reversed(
                    [v for k, v in node.items() if k not in _STRUCTURE and k not in _OPAQUE_KEYS]
                )
            )
    return texts, unreadable


def read_result(block: dict[str, Any], searchable: Callable[[str], str]) -> Result:
    texts, unreadable = _strings(block)
    call = block.get("tool_use_id")
    return Result(call if isinstance(call, str) else "", searchable("\n".join(texts)), unreadable)


def _content(holder: dict[str, Any]) -> list[Any]:
    content = holder.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else content or []


def _system_texts(system: Any) -> Iterator[str]:
    if isinstance(system, str):
        yield system
    elif isinstance(system, list):
        for block in system:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                yield block["text"]


class Conversation:
    """The trusted text and the untrusted results: the request's, then those an answer
    adds before the calls still to be judged."""

    def __init__(self, trusted: str, results: list[Result]) -> None:
        self.trusted = trusted
        self.results = results

    def add(self, result: Result) -> None:
        """A result the answer holds before the calls still to be judged."""
        self.results.append(result)

    @property
    def latest(self) -> Result | None:
        return self.results[-1] if self.results else None

    @property
    def unreadable(self) -> Result | None:
        """The latest result with a part the gateway could not read."""
        return next((r for r in reversed(self.results) if r.unreadable), None)

    def taints(self, found: Sequence[Candidate]) -> list[tuple[int, Result]]:
        """Each of `found` that occurs in an untrusted result and in no trusted text (a host,
        URL or e-mail address at its boundaries: provenance.hosts), in order: its index and
        the first result holding it. Linear in the texts and the candidates
        (provenance.lookup)."""
        texts = [result.text for result in self.results]
        sought = [(c.text, BOUNDARIES.get(c.kind, Boundary.ANYWHERE)) for c in found]
        lookup = finder(sought, sum(map(len, texts)) + len(self.trusted))
        untrusted = lookup.holders(texts, range(len(sought)))
        named = lookup.holders([self.trusted], sorted(untrusted)) if untrusted else {}
        return [
            (index, self.results[untrusted[index]])
            for index in sorted(untrusted)
            if index not in named
        ]

    def tainted(self, found: Sequence[Candidate]) -> tuple[int, str] | None:
        """The first of `found` that `taints` finds: its index and its result's id."""
        taints = self.taints(found)
        return (taints[0][0], taints[0][1].id) if taints else None

    def source(self, normal: str, kind: str = "value") -> str | None:
        """The id of the untrusted result `normal` (a candidate of `kind`) occurs in, when it
        occurs in no trusted text; else None."""
        found = self.tainted([Candidate(kind, normal)])
        return None if found is None else found[1]


def read_request(
    request: dict[str, Any], untrusted: Callable[[str], bool], searchable: Callable[[str], str]
) -> Conversation:
    """The conversation a request carries, `untrusted` naming the tools whose results are
    (besides `mcp__…`). A `tool_result` whose call is not in it is untrusted: nothing says
    which tool wrote it."""
    trusted = [searchable(text) for text in _system_texts(request.get("system"))]
    results: list[Result] = []
    names: dict[str, str] = {}
    messages = request.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        user = message.get("role") == "user"
        for block in _content(message):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif kind == "text" and user and isinstance(block.get("text"), str):
                trusted.append(searchable(block["text"]))
            elif kind == "tool_result":
                name = names.get(str(block.get("tool_use_id")))
                if name is None or name.startswith(CLIENT_MCP_PREFIX) or untrusted(name):
                    results.append(read_result(block, searchable))
            elif is_upstream_result(block):
                results.append(read_result(block, searchable))
    return Conversation(_SEPARATOR.join(trusted), results)
