"""Policies used by the tests, loaded by the gateway as `tests.support.policies:Name`."""

from __future__ import annotations

import json
import threading

from gateway_policies import (
    JSONObject,
    Policy,
    PolicyContext,
    PolicyOptions,
    PolicyViolation,
    StreamEvent,
)


class MutateNested(Policy):
    """Changes text deep inside the request, in place, as a careless policy might."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        block = request["messages"][0]["content"][0]
        block["text"] += " [mutated]"
        block.setdefault("cache_control", {"type": "ephemeral"})
        request["metadata"] = {"user_id": "mutated"}


class BlankClassified(Policy):
    """Empties every text block that mentions "classified", and must never be bypassed."""

    name = "blank_classified"
    bypassable = False

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        for message in request["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if "classified" in block.get("text", ""):
                    block["text"] = ""


class GuardedRewrite(Policy):
    """A request change that must never be bypassed."""

    bypassable = False

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["model"] = "claude-guarded"


class BlockStreamAtOptions(PolicyOptions):
    event: str


class BlockStreamAt(Policy[BlockStreamAtOptions]):
    """Refuses a stream when the event named in its options arrives."""

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        if event.type == self.options.event:
            raise PolicyViolation(f"blocked at {event.type}")
        return [event]


class FlipStream(Policy):
    """A buggy policy that changes the request's `stream` flag."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["stream"] = not request.get("stream", False)


class RefuseWordOptions(PolicyOptions):
    word: str


class RefuseWord(Policy[RefuseWordOptions]):
    """Refuses a request, or a response, whose text holds the word in its options."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        if self.options.word in json.dumps(request.get("messages")):
            raise PolicyViolation(f"the request mentions {self.options.word!r}")

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        if self.options.word in json.dumps(response.get("content")):
            raise PolicyViolation(f"the answer mentions {self.options.word!r}")


class RefuseAll(Policy):
    """Refuses every request and every response: shows which routes the policies see."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        raise PolicyViolation(f"probe: the request policies saw a {ctx.endpoint} request")

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        raise PolicyViolation(f"probe: the response policies saw a {ctx.endpoint} response")


class ShoutInPlace(Policy):
    """Upper-cases streamed text by editing each event's JSON in place and returning it."""

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        delta = event.json.get("delta") if event.type == "content_block_delta" else None
        if isinstance(delta, dict) and isinstance(delta.get("text"), str):
            delta["text"] = delta["text"].upper()
        return [event]


class SwallowStream(Policy):
    """Lets no streamed event through: a chain that leaves a whole stream nothing to relay."""

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        return []


BUSY_RELEASED = threading.Event()
BUSY_STARTED = threading.Event()


class BusyUntilReleased(Policy):
    """A request hook that holds the CPU (no await, no sleep) until the test releases it."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        BUSY_STARTED.set()
        spins = 0
        while not BUSY_RELEASED.is_set() and spins < 50_000_000:
            spins += 1


class TagOptions(PolicyOptions):
    tag: str


class Tag(Policy[TagOptions]):
    """Stamps which chain ran, and the caller and groups it saw, into `metadata.user_id`."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        seen = f"{self.options.tag}|{ctx.caller}|{','.join(ctx.caller_groups)}"
        request["metadata"] = {"user_id": seen}


class Explode(Policy):
    """Raises in every hook: a broken policy."""

    async def on_request(self, request: JSONObject, ctx: PolicyContext) -> None:
        request["model"] = "claude-exploded"
        raise RuntimeError("boom")

    async def on_response(self, response: JSONObject, ctx: PolicyContext) -> None:
        response["content"] = []
        raise RuntimeError("boom")

    async def on_stream_event(self, event: StreamEvent, ctx: PolicyContext) -> list[StreamEvent]:
        raise RuntimeError("boom")
