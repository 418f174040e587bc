"""Server tools and MCP servers under the tool policies, through the gateway with the SDK.

A server tool (web search, web fetch, code execution) or an MCP server's tool
runs inside the API, before any answer reaches the gateway. So the tool
policies decide on them in the request, before anything is sent, and the calls
the API made itself (`server_tool_use`, `mcp_tool_use`) are judged in the
answer like `tool_use` and logged as executed upstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types.beta import BetaMessage
from gateway_policies.builtin.block_tool_calls import BlockToolCalls
from gateway_policies.builtin.strip_tools import StripTools
from gateway_policies.builtin.tool_call_judge import ToolCallJudge
from gateway_policies.testing import (
    assemble,
    mcp_tool_use_block,
    run_request,
    run_response,
    run_stream,
    server_tool_use_block,
    stream,
    text_block,
    tool_result_block,
    tool_use_block,
)
from gateway_policies.upstream_tools import server_tools

from .support.client import policy_chain
from .support.fake_upstream import MODEL, FakeUpstream, Reply, message
from .support.gateway import GatewayFactory, GatewayStdout
from .support.sdk import both, sdk
from .support.servers import ThreadedServer
from .support.tool_calls import answer, ask_beta

WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search"}
WEB_FETCH = {"type": "web_fetch_20250910", "name": "web_fetch"}
CODE_EXECUTION = {"type": "code_execution_20250825", "name": "code_execution"}
BASH = {"type": "bash_20250124", "name": "bash"}
READ = {"name": "read", "description": "read a file", "input_schema": {"type": "object"}}
MCP_BETA = "mcp-client-2025-04-04"
GITHUB = {"type": "url", "url": "https://mcp.example.com/github", "name": "github"}
EXECUTED_UPSTREAM = "tool call executed upstream"


def search_answer(streaming: bool, query: str) -> Reply:
    """The API searched the web itself, then answered from the results."""
    return answer(
        streaming,
        server_tool_use_block(0, "web_search", {"query": query}),
        tool_result_block(1, "web_search_tool_result", "srvtoolu_00", SEARCH_RESULTS),
        text_block(2, "Here is what I found."),
    )


SEARCH_RESULTS = [
    {
        "type": "web_search_result",
        "url": "https://example.com/roadmap",
        "title": "Roadmap",
        "encrypted_content": "opaque",
        "page_age": None,
    }
]


def refused(call: Any) -> anthropic.PermissionDeniedError:
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        call()
    assert caught.value.status_code == 403
    body: Any = caught.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "permission_error"
    return caught.value


def upstream_lines(stdout: GatewayStdout) -> list[dict[str, Any]]:
    stdout.until(lambda text: EXECUTED_UPSTREAM in text and "call finished" in text)
    return [line for line in stdout.lines() if line.get("message") == EXECUTED_UPSTREAM]


# ------------------------------------------------- server tools in requests


@both
@pytest.mark.parametrize(
    ("rule", "tool", "named"),
    [
        ({"tool": "^web_fetch$"}, WEB_FETCH, "it matches rule 1"),
        ({"tool": "fetch", "input": "169\\.254"}, WEB_FETCH, "its input cannot be checked"),
        ({"tool": "^bash_code_execution$"}, CODE_EXECUTION, "it matches rule 1"),
        ({"tool": "^web_fetch$"}, {**WEB_FETCH, "name": "harmless"}, "it matches rule 1"),
    ],
    ids=["by-name", "name-and-input", "a-name-its-calls-carry", "renamed-by-its-type"],
)
def test_block_tool_calls_refuses_a_server_tool_a_rule_names_before_sending(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    streaming: bool,
    rule: dict[str, str],
    tool: dict[str, str],
    named: str,
) -> None:
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": [rule]})))
    error = refused(lambda: ask_beta(sdk(url), streaming, tools=[READ, tool]))
    assert f"refuses server tool {tool['name']!r} ({tool['type']})" in error.message
    assert named in error.message
    assert upstream.requests == []


def test_block_tool_calls_lets_client_tools_and_unnamed_server_tools_through(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    """`bash_20250124` is a client tool: its calls come back and are judged then. A server
    tool no rule names is sent; its calls are judged in the answer."""
    rules = [{"tool": "^bash$"}, {"input": "rm -rf"}]
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": rules})))
    ask_beta(sdk(url), False, tools=[BASH, WEB_SEARCH])
    assert [t["type"] for t in upstream.requests[0].json["tools"]] == [
        "bash_20250124",
        "web_search_20250305",
    ]


def test_server_tools_are_refused_on_count_tokens_and_in_batches(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    rules = [{"tool": "^web_fetch$"}]
    client = sdk(make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": rules}))))
    messages: Any = [{"role": "user", "content": "hi"}]
    tools: Any = [WEB_FETCH]
    refused(lambda: client.messages.count_tokens(model=MODEL, messages=messages, tools=tools))
    params: Any = {"model": MODEL, "max_tokens": 9, "messages": messages, "tools": tools}
    refused(lambda: client.messages.batches.create(requests=[{"custom_id": "a", "params": params}]))
    assert upstream.requests == []


@both
def test_strip_tools_strips_a_server_tool_by_its_name_or_a_name_its_calls_carry(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    names = ["web_fetch", "bash_code_execution"]
    url = make_gateway(policy_config=policy_chain(("strip_tools", {"names": names})))
    ask_beta(
        sdk(url),
        streaming,
        tools=[WEB_FETCH, CODE_EXECUTION, WEB_SEARCH],
        tool_choice={"type": "tool", "name": "code_execution"},
    )
    sent = upstream.requests[0].json
    assert sent["tools"] == [WEB_SEARCH]
    assert sent["tool_choice"] == {"type": "auto"}


# ------------------------------------------------------------ MCP servers


POLICIES: dict[str, dict[str, Any]] = {
    "block_tool_calls": {"rules": [{"tool": "^bash$"}]},
    "strip_tools": {"names": ["bash"]},
    "tool_call_judge": {"api_key_env": "TEST_JUDGE_KEY", "base_url": "http://127.0.0.1:9"},
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(
    ("allowed", "servers", "passes"),
    [
        ([], [GITHUB], False),
        (["github"], [GITHUB], True),
        ([GITHUB["url"]], [GITHUB], True),
        (["gitlab"], [GITHUB], False),
        (["github"], [GITHUB, {**GITHUB, "name": "other", "url": "https://evil.example"}], False),
    ],
    ids=["none-allowed", "by-name", "by-url", "another-allowed", "one-of-two"],
)
def test_mcp_servers_are_refused_unless_the_policy_allows_them(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    policy: str,
    allowed: list[str],
    servers: list[dict[str, str]],
    passes: bool,
) -> None:
    options = {**POLICIES[policy], "allowed_mcp_servers": allowed}
    url = make_gateway(policy_config=policy_chain((policy, options)))

    def call() -> BetaMessage:
        return ask_beta(sdk(url), False, mcp_servers=servers, betas=[MCP_BETA])

    if passes:
        call()
        assert upstream.requests[0].json["mcp_servers"] == servers
        return
    error = refused(call)
    assert "MCP server" in error.message
    assert "authorization" not in error.message
    assert upstream.requests == []


def test_an_mcp_toolset_must_name_an_allowed_server(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    options = {"rules": [{"tool": "^bash$"}], "allowed_mcp_servers": [GITHUB["url"]]}
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", options)))
    toolset = {"type": "mcp_toolset", "mcp_server_name": "github"}
    beta = ["mcp-client-2025-11-20"]
    ask_beta(sdk(url), False, mcp_servers=[GITHUB], tools=[toolset], betas=beta)
    other = {**toolset, "mcp_server_name": "elsewhere"}
    refused(lambda: ask_beta(sdk(url), False, mcp_servers=[GITHUB], tools=[other], betas=beta))
    assert len(upstream.requests) == 1


# ------------------------------------------- calls the API made, in answers


@both
def test_server_tool_calls_in_answers_are_judged_and_logged_as_executed_upstream(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    rules = [{"input": "secret-project"}]
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": rules})))
    upstream.script(search_answer(streaming, "secret-project roadmap"))
    reply = ask_beta(sdk(url), streaming, tools=[WEB_SEARCH])
    assert [b.type for b in reply.content] == ["text", "text", "text"]
    texts = [b.text for b in reply.content if b.type == "text"]
    assert "blocked a call to tool 'web_search', which had already run upstream" in texts[0]
    assert "withheld the result of the blocked call to tool 'web_search'" in texts[1]
    assert texts[2] == "Here is what I found."
    [line] = upstream_lines(gateway_stdout)
    assert line["level"] == "WARNING"
    assert line["name"] == "gateway_policies.tool_gate"
    assert (line["tool"], line["block_type"], line["blocked"]) == (
        "web_search",
        "server_tool_use",
        True,
    )
    assert line["call_id"]
    assert "secret-project" not in gateway_stdout.text


@both
def test_an_allowed_server_tool_call_passes_and_is_still_logged(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    rules = [{"input": "secret-project"}]
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", {"rules": rules})))
    upstream.script(search_answer(streaming, "weather in Lyon"))
    reply = ask_beta(sdk(url), streaming, tools=[WEB_SEARCH])
    assert [b.type for b in reply.content] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    [line] = upstream_lines(gateway_stdout)
    assert (line["level"], line["tool"], line["blocked"]) == ("INFO", "web_search", False)


@both
def test_an_mcp_tool_call_in_an_answer_is_judged_and_its_result_withheld(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    gateway_stdout: GatewayStdout,
    streaming: bool,
) -> None:
    options = {"rules": [{"tool": "^delete_repo$"}], "allowed_mcp_servers": ["github"]}
    url = make_gateway(policy_config=policy_chain(("block_tool_calls", options)))
    result = [{"type": "text", "text": "deleted"}]
    upstream.script(
        answer(
            streaming,
            mcp_tool_use_block(0, "delete_repo", "github", {"repo": "acme/app"}),
            tool_result_block(1, "mcp_tool_result", "mcptoolu_00", result),
            text_block(2, "Done."),
        )
    )
    reply = ask_beta(sdk(url), streaming, mcp_servers=[GITHUB], betas=[MCP_BETA])
    texts = [b.text for b in reply.content if b.type == "text"]
    assert len(texts) == 3
    assert "'delete_repo', which had already run upstream: it matches rule 1" in texts[0]
    assert "withheld" in texts[1]
    assert "deleted" not in json.dumps([b.model_dump() for b in reply.content])
    [line] = upstream_lines(gateway_stdout)
    assert (line["tool"], line["mcp_server"], line["block_type"]) == (
        "delete_repo",
        "github",
        "mcp_tool_use",
    )


# ---------------------------------------------------------- tool_call_judge


@pytest.fixture
def judge() -> Iterator[tuple[FakeUpstream, str]]:
    fake = FakeUpstream()
    server = ThreadedServer(fake).start()
    yield fake, server.url
    server.stop()


@pytest.mark.filterwarnings(
    # The judge's pooled connection outlives the test gateway's loop (see
    # test_policies_gateway.py); nothing leaks in a serving gateway.
    "ignore:unclosed resource <TCPTransport:ResourceWarning"
)
@both
def test_the_judge_refuses_server_tools_unless_allowed_and_judges_their_calls(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    judge: tuple[FakeUpstream, str],
    monkeypatch: pytest.MonkeyPatch,
    streaming: bool,
) -> None:
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-ant-judge")
    fake_judge, judge_url = judge
    options = {"base_url": judge_url, "api_key_env": "TEST_JUDGE_KEY"}
    strict = make_gateway(policy_config=policy_chain(("tool_call_judge", options)))
    error = refused(lambda: ask_beta(sdk(strict), streaming, tools=[WEB_SEARCH]))
    assert "the judge cannot see its calls before they run" in error.message
    assert upstream.requests == []

    allowing = {**options, "allowed_server_tools": ["web_search"]}
    url = make_gateway(policy_config=policy_chain(("tool_call_judge", allowing)))
    upstream.script(search_answer(streaming, "how to disable the audit log"))
    given = {"decision": "block", "reason": "evasion", "risk": 0.9}
    call = {"type": "tool_use", "id": "toolu_v", "name": "verdict", "input": given}
    fake_judge.script(Reply(body=message("", content=[call])))
    reply = ask_beta(sdk(url), streaming, tools=[WEB_SEARCH])
    texts = [b.text for b in reply.content if b.type == "text"]
    assert "rated its risk 0.9" in texts[0]
    assert "withheld" in texts[1]
    user = fake_judge.requests[0].json["messages"][0]["content"]
    asked = json.loads(user.split("\n", 1)[1].rsplit("\n", 1)[0])["block"]
    assert asked == {
        "type": "tool_use",
        "name": "web_search",
        "input": {"query": "how to disable the audit log"},
    }


# ------------------------------------------------ the policy, without a gateway


def test_a_renamed_server_tool_is_known_by_its_type() -> None:
    renamed = {**WEB_SEARCH, "name": "harmless"}
    (tool,) = server_tools({"tools": [renamed, READ]})
    assert tool.identities == ("harmless", "web_search_20250305", "web_search")
    request = {"model": MODEL, "max_tokens": 9, "messages": [], "tools": [renamed, READ]}
    assert run_request(StripTools({"names": ["web_search"]}), request)["tools"] == [READ]


def test_the_judge_allows_a_server_tool_by_type_or_its_types_name_never_a_rename() -> None:
    judge = ToolCallJudge({"allowed_server_tools": ["web_search", "code_execution_20250825"]})
    renamed_fetch = {**WEB_FETCH, "name": "web_search"}
    tools = [WEB_SEARCH, CODE_EXECUTION, renamed_fetch, WEB_FETCH]
    verdicts = [judge.refuses_server_tool(t) is None for t in server_tools({"tools": tools})]
    assert verdicts == [True, True, False, False]


def test_a_blocked_upstream_call_keeps_the_stream_valid_and_the_stop_reason() -> None:
    """Indices stay contiguous; a server call neither keeps nor ends a client tool_use turn."""
    policy = BlockToolCalls({"rules": [{"tool": "^web_fetch$"}, {"tool": "^bash$"}]})
    events = stream(
        server_tool_use_block(0, "web_fetch", {"url": "http://169.254.169.254/"}),
        tool_result_block(1, "web_fetch_tool_result", "srvtoolu_00", {"type": "x"}),
        tool_use_block(2, "read", {"path": "a"}),
        stop_reason="tool_use",
    )
    final = assemble(run_stream(policy, events))
    assert [b["type"] for b in final["content"]] == ["text", "text", "tool_use"]
    assert final["stop_reason"] == "tool_use"
    only_bash = stream(
        server_tool_use_block(0, "web_search", {"query": "q"}),
        tool_use_block(1, "bash", {"command": "ls"}),
        stop_reason="tool_use",
    )
    final = assemble(run_stream(policy, only_bash))
    assert [b["type"] for b in final["content"]] == ["server_tool_use", "text"]
    assert final["stop_reason"] == "end_turn"


def test_a_request_without_server_tools_or_mcp_servers_is_untouched() -> None:
    request = {
        "model": MODEL,
        "max_tokens": 9,
        "tools": [READ, BASH],
        "mcp_servers": [],
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert run_request(BlockToolCalls({"rules": [{"tool": "."}]}), request) == request


def test_only_the_blocked_calls_result_is_withheld_whatever_else_the_answer_holds() -> None:
    policy = BlockToolCalls({"rules": [{"tool": "^web_fetch$"}]})
    odd = {"type": "future_result", "tool_use_id": ["not", "an", "id"]}
    other = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_other", "content": []}
    response = message(
        "",
        content=[
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {}},
            {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1", "content": {}},
            odd,
            other,
        ],
    )
    out = run_response(policy, response)
    assert [b["type"] for b in out["content"]] == ["text", "text", "future_result", other["type"]]
    assert out["content"][2:] == [odd, other]
