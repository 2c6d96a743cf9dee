"""Line framing limits, message encoding, and schema generation from pydantic models."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from fsnotes.protocol.framing import LineSplitter, Oversized, encode_message
from fsnotes.protocol.tool_schema import SchemaError, model_schema


def test_lines_split_across_chunks_and_crlf_and_blank_lines() -> None:
    s = LineSplitter(max_line=100)
    assert s.feed(b'{"a":') == []
    assert s.feed(b'1}\r\n\n  \n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert s.end() == [b'{"c"']


def test_oversized_line_is_reported_once_and_skipped_without_buffering() -> None:
    s = LineSplitter(max_line=10)
    out = s.feed(b"x" * 8)
    out += s.feed(b"y" * 8)  # crosses the limit: reported now
    for _ in range(1000):
        out += s.feed(b"z" * 4096)  # still the same line: discarded as it streams
        assert len(s._buf) == 0
    out += s.feed(b'zz\n{"ok":1}\n')
    assert out == [Oversized(10), b'{"ok":1}']


def test_oversized_line_inside_one_chunk() -> None:
    s = LineSplitter(max_line=4)
    assert s.feed(b"abcdefgh\nab\n") == [Oversized(4), b"ab"]


def test_encode_is_one_compact_line_even_with_newlines_and_lone_surrogates() -> None:
    data = encode_message({"text": "a\nb", "u": "é"})
    assert data == '{"text":"a\\nb","u":"é"}\n'.encode()
    surrogate = encode_message({"s": "\ud800"})
    assert surrogate.count(b"\n") == 1 and json.loads(surrogate) == {"s": "\ud800"}


class Inner(BaseModel):
    x: int


class Outer(BaseModel):
    inner: Inner
    items: list[Inner] = Field(default_factory=list)
    alias_field: str = Field(alias="aliasField")


class Empty(BaseModel):
    pass


class Node(BaseModel):
    child: Node | None = None


def _has_ref(node: object) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or "$defs" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def test_schema_is_self_contained_by_alias_with_object_root() -> None:
    schema = model_schema(Outer)
    assert schema["type"] == "object"
    assert not _has_ref(schema)
    assert schema["properties"]["inner"]["properties"]["x"]["type"] == "integer"
    assert schema["properties"]["items"]["items"]["properties"]["x"]["type"] == "integer"
    assert "aliasField" in schema["properties"]


def test_model_without_fields_gets_the_spec_no_argument_schema() -> None:
    assert model_schema(Empty) == {"type": "object", "additionalProperties": False}


def test_recursive_model_is_rejected_when_building() -> None:
    with pytest.raises(SchemaError, match="recursive"):
        model_schema(Node)


def test_non_finite_numbers_never_reach_the_wire_as_non_json() -> None:
    # Python's json writes NaN/Infinity, which are not JSON; a note's frontmatter can parse to
    # inf (a 400-digit decimal). Like JSON.stringify, non-finite numbers become null.
    def strict(data: bytes) -> object:
        return json.loads(data, parse_constant=lambda c: pytest.fail(f"{c} on the wire"))

    data = encode_message({"a": float("inf"), "b": [float("nan"), 1.5], "c": {"d": -float("inf")}})
    assert data.count(b"\n") == 1
    assert strict(data) == {"a": None, "b": [None, 1.5], "c": {"d": None}}
    surrogate = encode_message({"s": "\ud800", "x": float("nan")})
    assert strict(surrogate) == {"s": "\ud800", "x": None}
