"""The Messages API's known shape: the object keys a record may name in a JSON path.

A changed path in the fallback's record is built from a request's own keys,
and a client chooses its keys: a key holding 200 KB, or an API key, would be
logged as a "path". So a path quotes only the field names of the Messages API
(request, messages, content blocks, tools, citations, MCP servers...), never
a key inside a map whose keys are the client's (a tool call's `input`, a
tool's `input_schema`, `metadata`, ...). Every other key is counted, not
quoted (runtime/diff.py). A field the API adds later is counted until it is
listed here; listing it is safe, since a name listed is a word of ours.
"""

from __future__ import annotations

FREE_FORM_MAPS = frozenset(
    {"input", "input_schema", "input_examples", "metadata", "schema", "configs"}
)
"""Fields whose value is a map of the client's own keys (a tool's input, a JSON schema)."""

KNOWN_KEYS = FREE_FORM_MAPS | frozenset(
    {
        # the request
        "model", "messages", "max_tokens", "system", "stop_sequences", "stream",
        "temperature", "top_k", "top_p", "tools", "tool_choice", "thinking",
        "mcp_servers", "container", "service_tier", "context_management",
        "output_format", "output_config", "inference_geo",
        # messages and content blocks
        "role", "content", "type", "text", "id", "name", "tool_use_id", "is_error",
        "cache_control", "ttl", "citations", "source", "media_type", "data", "url",
        "file_id", "title", "context", "signature", "server_name",
        "encrypted_content", "page_age", "retrieved_at", "error_code", "caller",
        "cited_text", "document_index", "document_title", "start_char_index",
        "end_char_index", "start_page_number", "end_page_number", "start_block_index",
        "end_block_index", "encrypted_index", "search_result_index", "enabled",
        # tools and tool_choice
        "description", "strict", "defer_loading", "allowed_callers", "max_uses",
        "allowed_domains", "blocked_domains", "user_location", "city", "region",
        "country", "timezone", "max_content_tokens", "display_width_px",
        "display_height_px", "display_number", "mcp_server_name", "default_config",
        "disable_parallel_tool_use", "budget_tokens",
        # MCP servers, the container, context management
        "authorization_token", "tool_configuration", "allowed_tools", "skills",
        "skill_id", "version", "edits", "trigger", "keep", "clear_at_least",
        "exclude_tools", "clear_tool_inputs", "value", "effort",
    }
)  # fmt: skip
"""Every field name of the Messages API's request a path may quote."""
