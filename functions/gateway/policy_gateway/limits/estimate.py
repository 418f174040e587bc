"""What a call is admitted at before the upstream has said what it used.

As the Messages API's own limiter does: the input tokens estimated from the
request, the output tokens at `max_tokens`. The estimate is conservative (it
errs high), so that admission never lets a caller past a limit that the answer's
`usage` then shows it crossed: BYTES_PER_TOKEN bytes of the request body per
token, where Claude's tokenizer averages 3.5 to 4 characters of English per
token and a CJK character (3 bytes of UTF-8) is about one token; the JSON around
the text only adds bytes. An image sent inline counts IMAGE_TOKENS instead of
its base64 (the API bills an image by its pixels, at most about 1,600 tokens),
else one screenshot would read as a few hundred thousand tokens. Both are
replaced by the answer's `usage` when it comes (limiter.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

BYTES_PER_TOKEN = 3
IMAGE_TOKENS = 1600


@dataclass(frozen=True)
class Estimate:
    input_tokens: int
    output_tokens: int
    model: str | None


def estimate(body_bytes: int, request: Mapping[str, Any]) -> Estimate:
    """The tokens a Messages request is admitted at: `body_bytes` long, parsed as `request`."""
    counted = body_bytes
    images = 0
    for data in _inline_images(request):
        counted -= len(data)
        images += 1
    input_tokens = -(-max(counted, 0) // BYTES_PER_TOKEN) + images * IMAGE_TOKENS
    max_tokens = request.get("max_tokens")
    output_tokens = max_tokens if type(max_tokens) is int and max_tokens > 0 else 0
    model = request.get("model")
    return Estimate(input_tokens, output_tokens, model if isinstance(model, str) else None)


def _inline_images(request: Mapping[str, Any]) -> Iterator[str]:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            yield from _images_in(content)


def _images_in(blocks: list[Any]) -> Iterator[str]:
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "image":
            source = block.get("source")
            if isinstance(source, dict) and isinstance(source.get("data"), str):
                yield source["data"]
        elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            yield from _images_in(block["content"])
