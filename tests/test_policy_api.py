"""The policy API itself: options declared once, setup, typed call state, the higher-level
bases (TextRewriter, ToolCallGate) from the package root, and pydantic off the cold path."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from gateway_policies import (
    JSONObject,
    Policy,
    PolicyChain,
    PolicyConfigError,
    PolicyContext,
    PolicyOptions,
    TextRewriter,
    ToolCallGate,
    load_chain,
)
from gateway_policies.builtin.redact_secrets import RedactSecrets
from gateway_policies.builtin.string_replace import StringReplace
from gateway_policies.testing import (
    assemble,
    context,
    event,
    run_request,
    run_response,
    run_stream,
    stream,
    text_block,
    tool_use_block,
)

pytestmark = pytest.mark.unit


class WordOptions(PolicyOptions):
    word: str


class Upper(TextRewriter[WordOptions]):
    rewrites_responses = True

    def setup(self) -> None:
        self.pattern = re.compile(re.escape(self.options.word))

    def rewrite(self, text: str) -> str:
        return self.pattern.sub(self.options.word.upper(), text)


def test_the_options_type_is_declared_once_and_validated() -> None:
    policy = Upper({"word": "hi"})
    assert isinstance(policy.options, WordOptions)
    assert Upper.Options is WordOptions
    with pytest.raises(PolicyConfigError, match=r"Upper: invalid options: word: Field required"):
        Upper({})


class StricterOptions(WordOptions):
    times: int = 1


class Stricter(Upper):
    Options = StricterOptions


def test_a_subclass_keeps_or_replaces_its_parents_options_type() -> None:
    class Same(Upper):
        pass

    assert Same.Options is WordOptions
    assert Stricter.Options is StricterOptions
    assert Stricter({"word": "a", "times": 2}).options == StricterOptions(word="a", times=2)


def test_unknown_option_keys_are_refused() -> None:
    with pytest.raises(PolicyConfigError, match="colour: Extra inputs are not permitted"):
        Upper({"word": "hi", "colour": "red"})


def test_a_plain_policy_takes_no_options() -> None:
    assert Policy().options is None
    with pytest.raises(PolicyConfigError, match=r"takes no options, got \['x'\]"):
        Policy({"x": 1})


def test_a_type_argument_that_is_not_an_options_model_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="takes a PolicyOptions subclass"):

        class Wrong(Policy[dict]):  # type: ignore[type-arg]
            pass


class Fragile(Policy[WordOptions]):
    def setup(self) -> None:
        re.compile(self.options.word)


def test_a_setup_that_fails_is_a_config_error_naming_the_type_only() -> None:
    config = {"policies": [{"policy": f"{__name__}:Fragile", "options": {"word": "(secret"}}]}
    with pytest.raises(PolicyConfigError, match=r"Fragile failed to set up \(error\)") as caught:
        load_chain(config)
    assert "secret" not in str(caught.value)


@dataclass
class Seen:
    words: list[str] = field(default_factory=list)


class Remember(Policy):
    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        state = ctx.state(self, Seen)
        state.words.append(str(request.get("model")))
        request["seen"] = list(state.words)


def test_call_state_is_typed_per_policy_and_per_call() -> None:
    first, second = Remember(), Remember()
    ctx = context()
    assert ctx.state(first, Seen) is ctx.state(first, Seen)
    assert ctx.state(first, Seen) is not ctx.state(second, Seen)
    assert context().state(first, Seen) is not ctx.state(first, Seen)
    with pytest.raises(TypeError, match="two different types"):
        ctx.state(first, dict)
    assert run_request([first, second], {"model": "m"})["seen"] == ["m"]


THINKING = {"type": "thinking", "thinking": "hi", "signature": "sig"}


def test_text_rewriter_reaches_every_request_text_place_but_thinking() -> None:
    request: JSONObject = {
        "model": "m",
        "system": [{"type": "text", "text": "hi"}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "hi"},
                    {"type": "document", "source": {"type": "text", "data": "hi"}, "context": "hi"},
                ],
            },
            {"role": "assistant", "content": [THINKING, {"type": "text", "text": "hi"}]},
        ],
    }
    out = run_request(Upper({"word": "hi"}), request)
    assert "hi" not in str(out).replace(str(THINKING), "")
    assert out["messages"][2]["content"][0] == THINKING


def test_text_rewriter_rewrites_responses_and_streamed_text_only_when_asked() -> None:
    response: JSONObject = {"content": [THINKING, {"type": "text", "text": "hi"}]}
    assert run_response(Upper({"word": "hi"}), response)["content"][1]["text"] == "HI"
    thinking_delta = event(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hi"},
        }
    )
    out = run_stream(Upper({"word": "hi"}), [thinking_delta, *stream(text_block(1, "hi", "hi"))])
    assert out[0].json["delta"]["thinking"] == "hi"
    texts = [e.json["delta"].get("text") for e in out if e.event == "content_block_delta"]
    assert texts == [None, "HI", "HI"]


def test_the_chain_calls_only_the_hooks_a_rewriter_turned_on() -> None:
    assert not PolicyChain([RedactSecrets()]).filters_stream
    assert PolicyChain([RedactSecrets()]).has_request_hooks
    replace = [["a", "b"]]
    request_only = StringReplace({"replacements": replace})
    assert not PolicyChain([request_only]).filters_stream
    responses = StringReplace({"replacements": replace, "apply_to": "response"})
    assert not PolicyChain([responses]).has_request_hooks
    assert PolicyChain([responses]).filters_stream
    assert PolicyChain([responses]).has_response_hooks


class NoBash(ToolCallGate):
    async def blocked(self, tool: str, tool_input: Any, ctx: PolicyContext) -> str | None:
        return "no bash" if tool == "bash" else None


def test_a_tool_call_gate_is_one_method() -> None:
    events = stream(tool_use_block(0, "bash", {"command": "ls"}), stop_reason="tool_use")
    final = assemble(run_stream(NoBash(), events))
    assert final["content"][0]["text"].endswith("blocked a call to tool 'bash': no bash]")
    assert final["stop_reason"] == "end_turn"


def test_importing_the_policy_api_leaves_pydantic_for_policies_with_options() -> None:
    probe = (
        "import sys, gateway_policies, gateway_policies.runtime.sse, gateway_policies.builtin.noop;"
        "print('pydantic' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


class CountedRewrite(Policy):
    """Changes the model, counting how often its request hook runs."""

    runs = 0

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        type(self).runs += 1
        request["model"] = "claude-rewritten"


class MetadataRewrite(Policy):
    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["metadata"] = {"user_id": "rewritten"}


def attribute(chain: PolicyChain, locations: list[tuple[str | int, ...]]) -> dict[str, list[str]]:
    document: JSONObject = {"model": "claude-asked", "metadata": {"user_id": "u"}}
    return asyncio.run(chain.attribute_changes(document, locations, context()))


def test_a_lone_request_hook_is_named_without_being_replayed() -> None:
    CountedRewrite.runs = 0
    chain = PolicyChain([CountedRewrite()])
    assert attribute(chain, [("model",)]) == {"CountedRewrite": ["$.model"]}
    assert attribute(chain, []) == {}
    assert CountedRewrite.runs == 0


def test_several_request_hooks_are_told_apart_by_replaying_them() -> None:
    CountedRewrite.runs = 0
    chain = PolicyChain([CountedRewrite(), MetadataRewrite()])
    assert attribute(chain, [("model",), ("metadata",)]) == {
        "CountedRewrite": ["$.model"],
        "MetadataRewrite": ["$.metadata"],
    }
    assert CountedRewrite.runs == 1


def test_a_replayed_context_is_the_same_call_without_any_policys_state() -> None:
    async def key() -> str | None:
        return "sk-ant-gateway"

    ctx = PolicyContext(endpoint="count_tokens", stream=True, call_id="c-1", upstream_api_key=key)
    policy = CountedRewrite()
    ctx.state(policy, list).append("buffered")
    again = ctx.replay()
    assert (again.endpoint, again.stream, again.call_id) == ("count_tokens", True, "c-1")
    assert again.upstream_api_key is key
    assert again.state(policy, list) == []
