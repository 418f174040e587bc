"""Options every built-in tool policy shares: which MCP servers a request may name."""

from __future__ import annotations

from pydantic import Field

from .options import PolicyOptions


class McpServerOptions(PolicyOptions):
    allowed_mcp_servers: list[str] = Field(default_factory=list)
    """MCP servers a request may name (`mcp_servers`), each by its name or its URL, exactly;
    none by default. A server's tools run upstream, where no call can be judged before it runs."""
