"""Remove named tools from requests (`{"names": ["bash", ...]}`).

`tool_choice` is kept valid, since the API rejects a choice that names a
missing tool or forces a tool call with no tools:
- a `{"type": "tool"}` choice naming a removed tool becomes `{"type": "auto"}`
  (forcing some *other* tool would be a guess at the client's intent);
- with no tools left, `tools` and `tool_choice` are both removed, unless the
  conversation already holds tool_use/tool_result blocks (the API then needs
  tools defined): a placeholder tool stays, with `tool_choice` `none`.
`disable_parallel_tool_use` is kept whenever the choice survives.

A server tool is removed like any other by its name, and also by its type or
the name its type gives it (a renamed `web_search_20250305` is still
`web_search`); a code execution tool also when `names` lists a name its calls
carry (`bash_code_execution`): it cannot be given only in part. MCP servers
are refused unless `allowed_mcp_servers` lists them (gateway_policies.upstream_tools).

Not bypassable: the point is that the model never gets the tool, so the
fallback strips it from the original again (the narrow fallback).
"""

from __future__ import annotations

from pydantic import Field

from ..base import JSONObject, Policy, PolicyContext
from ..tool_options import McpServerOptions
from ..upstream_tools import refuse_unlisted_mcp_servers, server_tools

PLACEHOLDER_TOOL = {
    "name": "no_tools_available",
    "description": "No tools are available in this conversation.",
    "input_schema": {"type": "object", "properties": {}},
}


def _has_tool_blocks(request: JSONObject) -> bool:
    messages = request.get("messages")
    return isinstance(messages, list) and any(
        isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


class StripToolsOptions(McpServerOptions):
    names: list[str] = Field(min_length=1)


class StripTools(Policy[StripToolsOptions]):
    name = "strip_tools"
    bypassable = False

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        refuse_unlisted_mcp_servers(request, self.options.allowed_mcp_servers, self.label)
        tools = request.get("tools")
        if not isinstance(tools, list):
            return
        listed = set(self.options.names)
        upstream = list(server_tools(request))
        removed = {
            index
            for index, t in enumerate(tools)
            if isinstance(t, dict) and t.get("name") in listed
        } | {tool.index for tool in upstream if listed.intersection(tool.identities)}
        if not removed:
            return
        kept = [t for index, t in enumerate(tools) if index not in removed]
        names = listed | {tools[index].get("name") for index in removed}
        # A server tool by its type, which says what it is; its name is the client's word.
        types = {tool.index: tool.type for tool in upstream}
        stripped = sorted({types.get(i) or str(tools[i].get("name")) for i in removed})
        ctx.record(self, "strip", tools=stripped)
        if not kept:
            if _has_tool_blocks(request):
                # The API refuses a conversation holding tool_use/tool_result
                # blocks when no tools are defined: a placeholder the model may
                # not call keeps the request valid without returning the tool.
                request["tools"] = [PLACEHOLDER_TOOL]
                request["tool_choice"] = {"type": "none"}
            else:
                request.pop("tools")
                request.pop("tool_choice", None)
            return
        request["tools"] = kept
        choice = request.get("tool_choice")
        if not isinstance(choice, dict):
            return
        if choice.get("type") == "tool" and choice.get("name") in names:
            request["tool_choice"] = {
                "type": "auto",
                **{k: v for k, v in choice.items() if k == "disable_parallel_tool_use"},
            }
