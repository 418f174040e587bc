"""routes/body.parse_object: orjson for the bodies the SDKs write, `json` for everything else.

A body orjson writes back byte for byte is read by orjson; any other body by
the strict `json` path. Whatever the path, the document is the one `json`
reads, and what `json` refuses is refused: a duplicate key, an integer beyond
64 bits and a lone surrogate must never take orjson's reading.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_gateway.errors import GatewayError
from policy_gateway.routes import body
from policy_gateway.routes.body import NonFinite, parse_object

pytestmark = pytest.mark.unit


def sdk(document: Any) -> bytes:
    """As the official SDKs write a request: no spaces, characters as UTF-8."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def strict(raw: bytes) -> Any:
    """The reading every body must get: `json`'s, with its refusals."""
    return body._strict(raw)


def typed(value: Any) -> Any:
    """`value` with each number's type beside it, so 1 and 1.0 do not compare equal."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (type(value).__name__, value)
    return value


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
documents = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=20,
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_every_object_reads_as_json_reads_it(document: dict[str, Any]) -> None:
    for raw in (sdk(document), json.dumps(document).encode()):
        assert typed(parse_object(raw)) == typed(strict(raw))


def test_an_sdk_body_is_read_by_orjson() -> None:
    raw = sdk({"model": "m", "messages": [{"role": "user", "content": "caf\u00e9 \u2014 ok"}]})
    assert body._compact(raw)
    assert body._canonical(raw) == json.loads(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model":"m","stream":true,"messages":[],"stream":false}',
        b'{"model":"m","messages":[{"role":"user","role":"assistant"}]}',
    ],
    ids=["top-level", "nested"],
)
def test_a_compact_duplicate_key_is_refused(raw: bytes) -> None:
    assert body._compact(raw)
    with pytest.raises(GatewayError) as refused:
        parse_object(raw)
    assert refused.value.status == 400
    assert "duplicate key" in refused.value.message


@pytest.mark.parametrize("number", [2**64, 2**70, -(2**63) - 1, 10**30])
def test_a_compact_integer_beyond_64_bits_stays_an_exact_integer(number: int) -> None:
    raw = b'{"model":"m","metadata":{"n":%d}}' % number
    assert type(orjson.loads(raw)["metadata"]["n"]) is float, "orjson alone reads a float"
    parsed = parse_object(raw)["metadata"]["n"]
    assert type(parsed) is int
    assert parsed == number


def test_a_compact_lone_surrogate_is_read_as_json_reads_it() -> None:
    raw = b'{"model":"m","messages":[{"role":"user","content":"x \\ud800 x"}]}'
    assert parse_object(raw)["messages"][0]["content"] == "x \ud800 x"


def test_a_compact_number_beyond_a_float_is_marked_for_refusal() -> None:
    parsed = parse_object(b'{"model":"m","temperature":1e999}')
    assert isinstance(parsed["temperature"], NonFinite)


def test_compact_nesting_deeper_than_orjson_writes_reads_as_json_reads_it() -> None:
    raw = b'{"a":' + b"[" * 300 + b"]" * 300 + b"}"
    assert parse_object(raw) == strict(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m"}',
        b'{\n  "model": "m"\n}',
        b'{"model":"caf\\u00e9"}',
        b'{"model":"m","temperature":1e-07}',
        b'{"model":"m","top_p":1E2}',
    ],
    ids=["spaced", "pretty", "ascii-escaped", "python-float", "upper-exponent"],
)
def test_a_body_orjson_would_write_otherwise_takes_json(raw: bytes) -> None:
    assert body._canonical(raw) is None
    assert typed(parse_object(raw)) == typed(strict(raw))
