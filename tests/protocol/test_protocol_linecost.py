"""line_cost: values counted on the bytes match what the parser builds, strings (however full of
braces and commas) count once, and the charge bounds what the parsed message really holds."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsnotes.protocol.limits import MAX_LINE_VALUES
from fsnotes.protocol.linecost import line_cost
from tests.protocol.shapes import code_note

MIB = 1024 * 1024

# Text full of what JSON structure and escaping are made of, plus characters of each width.
_tricky = st.text(
    alphabet=st.sampled_from([*'ab"\\{}[],: \n\t/u', "é", "€", "😀", "\x00", "\ud800"])
)
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _tricky
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_tricky, inner, max_size=5),
    max_leaves=40,
)


def parsed_count(value: Any) -> int:
    """Values and keys in ``value``, plus one for each empty list or object (whose opening
    bracket announces nothing)."""
    if isinstance(value, list):
        return 1 + (0 if value else 1) + sum(parsed_count(v) for v in value)
    if isinstance(value, dict):
        return 1 + (0 if value else 1) + sum(1 + parsed_count(v) for v in value.values())
    return 1


@settings(max_examples=400, deadline=None)
@given(_values, st.booleans(), st.booleans())
def test_values_counted_on_the_bytes_are_what_the_parser_builds(
    value: Any, ascii_only: bool, compact: bool
) -> None:
    separators = (",", ":") if compact else (", ", ": ")
    line = json.dumps(value, ensure_ascii=ascii_only, separators=separators).encode(
        "utf-8", "surrogatepass"
    )
    assert line_cost(line).values == parsed_count(json.loads(line))


def test_a_4_mib_note_of_code_counts_as_one_string() -> None:
    def create(content: str) -> bytes:
        arguments = {"path": "code.md", "content": content}
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": arguments}
        return json.dumps(message).encode()

    note = code_note(4 * MIB)
    assert note.count("{") + note.count(",") > 500_000  # what the note is made of
    big, empty = line_cost(create(note)), line_cost(create(""))
    assert big.values == empty.values < 20
    assert big.charge == len(create(note)) + (empty.charge - len(create("")))


def held_after_parsing(line: bytes) -> int:
    text = line.decode()
    tracemalloc.start()
    try:
        parsed = json.loads(text)
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del parsed
    return held


UNITS = {
    "empty objects": b"{},",
    "empty arrays": b"[],",
    "floats": b"1.5,",
    "short strings": b'"ab",',
    "one-key objects": b'{"a":0},',
    "nested objects": b'{"a":{"a":{}}},',
    "euro strings": '"€",'.encode(),
    "emoji strings": '"😀",'.encode(),
    "escaped emoji": b'"\\ud83d\\ude00",',
}


@pytest.mark.parametrize("unit", UNITS.values(), ids=UNITS.keys())
def test_the_charge_bounds_what_the_parsed_values_hold(unit: bytes) -> None:
    # As many as the per-line cap admits: each unit holds one value per [ { , or : in it.
    count = (MAX_LINE_VALUES - 2) // sum(unit.count(c) for c in b"[{,:")
    line = b"[" + unit * (count - 1) + unit[:-1] + b"]"
    cost = line_cost(line)
    assert cost.values <= MAX_LINE_VALUES
    held = held_after_parsing(line)
    print(f"{unit!r}: {cost.values} values, held {held} B, charged {cost.charge} B")
    assert held <= cost.charge


@pytest.mark.parametrize(
    ("text", "width"),
    [
        ("plain ASCII", 1),
        ("caf\N{LATIN SMALL LETTER E WITH ACUTE}", 1),
        ("\N{EURO SIGN}", 2),
        ("\N{CJK UNIFIED IDEOGRAPH-6F22}", 2),
        ("\N{GRINNING FACE}", 4),
    ],
)
@pytest.mark.parametrize("ascii_only", [False, True], ids=["utf8", "escaped"])
def test_a_long_string_is_charged_at_its_widest_character(
    text: str, width: int, ascii_only: bool
) -> None:
    # CPython stores a str at the width of its widest character: one emoji makes every ASCII
    # character in the string take 4 bytes.
    line = json.dumps({"s": "a" * 1_000_000 + text}, ensure_ascii=ascii_only).encode()
    cost = line_cost(line)
    assert width * len(line) <= cost.charge < width * len(line) + 1000
    assert held_after_parsing(line) <= cost.charge


def test_a_line_of_millions_of_values_is_counted_past_the_cap() -> None:
    for line in (b"[" + b"{}," * 1_000_000 + b"{}]", b"[" + b'"ab",' * 1_000_000 + b'"ab"]'):
        assert line_cost(line).values > MAX_LINE_VALUES
