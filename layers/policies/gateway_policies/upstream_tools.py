"""Tools that run upstream: server tools and MCP servers, found in a request.

A client tool's call comes back in the answer for the client to run, so a
policy can judge it there. A server tool (`web_search`, `web_fetch`,
`code_execution`, ...) and the tools of an MCP server named in `mcp_servers`
run inside the API, before any answer reaches the gateway: a policy that gates
tools has to decide on them from the request, before anything is sent, and can
only record their calls afterwards.

A `tools[]` entry without a `type` (or `custom`) is the client's own tool;
the Anthropic-defined client tools are the types below. Every other type is
taken to run upstream, so a tool type newer than this list is gated, not waved
through.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from .base import JSONObject
from .exceptions import PolicyViolation

CLIENT_TOOL_TYPES = ("custom", "bash_", "text_editor_", "computer_", "memory_", "browser_toolset_")
MCP_TOOLSET = "mcp_toolset"

# What each code execution tool can call upstream besides its own name.
_EXTRA_CALL_NAMES = {"code_execution_": ("bash_code_execution", "text_editor_code_execution")}

UPSTREAM_CALL_TYPES = ("server_tool_use", "mcp_tool_use")
"""Answer blocks recording a call the API made itself: it ran before the gateway saw it."""

CALL_TYPES = ("tool_use", *UPSTREAM_CALL_TYPES)


@dataclass(frozen=True)
class ServerTool:
    """A `tools[]` entry that runs upstream, and every name its calls may carry."""

    index: int
    type: str
    names: tuple[str, ...]
    """The entry's name, then any other name its calls carry; empty for a nameless entry."""

    @property
    def name(self) -> str:
        """What the request calls it: its name, else its type."""
        return self.names[0] if self.names else self.type

    @property
    def type_name(self) -> str:
        """The name its type gives it (`web_search` of `web_search_20250305`), whatever the
        entry calls itself: a renamed server tool still runs as what its type says."""
        base, _, version = self.type.rpartition("_")
        return base if base and version.isdigit() else self.type

    @property
    def identities(self) -> tuple[str, ...]:
        """Every name a policy may know it by: its names, its type and its type's name."""
        return (*self.names, self.type, self.type_name)


def _tools(request: JSONObject) -> list[Any]:
    tools = request.get("tools")
    return tools if isinstance(tools, list) else []


def server_tools(request: JSONObject) -> Iterator[ServerTool]:
    """The request's server tools (MCP toolsets aside: their server decides those)."""
    for index, tool in enumerate(_tools(request)):
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if not isinstance(kind, str) or kind.startswith(CLIENT_TOOL_TYPES) or kind == MCP_TOOLSET:
            continue
        name = tool.get("name")
        names: tuple[str, ...] = (name,) if isinstance(name, str) else ()
        for prefix, extra in _EXTRA_CALL_NAMES.items():
            if kind.startswith(prefix):
                names += extra
        yield ServerTool(index, kind, names)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def refuse_unlisted_mcp_servers(request: JSONObject, allowed: Collection[str], policy: str) -> None:
    """PolicyViolation unless every MCP server the request names is allowed, by name or URL.

    An MCP toolset in `tools` names its server: it must be one of the allowed
    `mcp_servers` entries. Anything in `mcp_servers` that is not a server
    entry the gateway can read is refused like an unlisted server.
    """
    servers = request.get("mcp_servers")
    entries = servers if isinstance(servers, list) else [] if servers is None else [servers]
    passed: set[str] = set()
    for entry in entries:
        server = entry if isinstance(entry, dict) else {}
        name, url = _text(server.get("name")), _text(server.get("url"))
        if not ((name is not None and name in allowed) or (url is not None and url in allowed)):
            raise _refused(name, policy)
        if name is not None:
            passed.add(name)
    for tool in _tools(request):
        if isinstance(tool, dict) and tool.get("type") == MCP_TOOLSET:
            name = _text(tool.get("mcp_server_name"))
            if name not in passed:
                raise _refused(name, policy)


def _refused(name: str | None, policy: str) -> PolicyViolation:
    named = f"MCP server {name!r}" if name is not None else "an MCP server"
    return PolicyViolation(
        f"{policy} refuses {named}: its tools would run upstream, before the gateway "
        "could judge any call, and the operator has not allowed it"
    )


def refuse_server_tool(tool: ServerTool, policy: str, reason: str) -> PolicyViolation:
    """The refusal of a server tool: its calls would run before the gateway saw them."""
    return PolicyViolation(
        f"{policy} refuses server tool {tool.name!r} ({tool.type}): {reason}. A server tool runs "
        "upstream, before the gateway sees its calls, so it is refused before anything is sent"
    )
