"""What one line will cost once parsed, measured on its bytes before it is parsed.

The line limit bounds what a peer makes the server read, not what the parsed message holds:
8 MB of ``{},`` parses to 2.7 million dicts (25 bytes held per byte of line), and a string of
ASCII with one emoji in it takes 4 bytes per character as a Python ``str``. :func:`line_cost`
finds both from the bytes with a few passes in C (``translate``, ``split``, ``count``), so the
core can refuse a line of absurdly many values unparsed and charge every request in flight
what its message holds.

Limits of the measurement: exact for valid JSON up to empty containers (each counts one value
more), and never an under-count of what :func:`json.loads` builds before it fails on invalid
JSON (it reads the same prefix the same way). It costs about as much as parsing: 3 µs for a small
request; for a 4 MiB note 4 ms (prose) to 28 ms (code full of quotes and backslashes) and 42 ms
(text sent as ``\\uXXXX`` escapes), where ``json.loads`` takes 5 to 32 ms (2-core machine). While
it runs it holds at most two more copies of the line, usually far less.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fsnotes.protocol.limits import MAX_LINE_VALUES, VALUE_BYTES

# Every byte but a quote and the four that announce a value (see _values).
_NOT_MARKS = bytes(b for b in range(256) if b not in b'"[{,:')
# Bytes below which a UTF-8 character still fits one byte of a str (U+00FF: lead byte C3), and
# below which it fits two (U+FFFF: lead bytes up to EF); F0-F4 lead astral characters.
_BELOW_TWO_BYTE = bytes(range(0xC4))
_BELOW_ASTRAL = bytes(range(0xF0))
# \uXXXX escapes that make a str two bytes a character (U+0100 and up) or four (a surrogate
# pair's high half). Over-matching (an escaped backslash before a "u") only over-charges.
_ESCAPE_TWO_BYTE = re.compile(rb"\\u(?:0[1-9a-fA-F]|[1-9a-fA-F])")
_ESCAPE_ASTRAL = re.compile(rb"\\u[dD][89abAB]")


@dataclass(frozen=True)
class LineCost:
    """``values``: JSON values and object keys the line holds; when that is more than
    :data:`MAX_LINE_VALUES`, counting may have stopped early, and the figure only says so.
    ``charge``: an upper bound, in bytes, of what the parsed message holds (its strings at the
    widest character they may have, plus :data:`VALUE_BYTES` for each value)."""

    values: int
    charge: int


def line_cost(line: bytes) -> LineCost:
    """Measure ``line`` (one JSON text, UTF-8) without parsing it. See the module docstring."""
    values = _values(line)
    if values > MAX_LINE_VALUES:
        return LineCost(values, 0)
    return LineCost(values, _char_width(line) * len(line) + VALUE_BYTES * values)


def _values(line: bytes) -> int:
    """Values and keys in ``line``, counted as the bytes that announce them outside strings.

    Every value but the outermost follows one of ``[ { , :`` (an array's first element "[", an
    object's first key "{", any later element or key ",", a member's value ":"), and each of
    those announces at most one (an empty ``[]`` or ``{}`` announces none: an over-count).
    """
    plain = line
    # (find of one byte is memchr, far faster than searching two: try it first.)
    if line.find(b"\\") >= 0 and b'\\"' in line:
        # Only escaped quotes hide where strings end, and a run of escaped backslashes before a
        # quote decides whether it is escaped: drop the pairs left to right, as a parser reads.
        plain = plain.replace(b"\\\\", b"").replace(b'\\"', b"")
    # What is left of structure: quotes and announcers (one pass; a note's text mostly goes).
    marks = plain.translate(None, _NOT_MARKS)
    del plain
    quotes = marks.count(b'"')
    if quotes // 2 > MAX_LINE_VALUES:
        # Every string is a value or a key: too many already (and too many to split the line
        # into pieces at each).
        return quotes // 2
    # Pieces at even indexes lie outside strings (an unterminated string leaves its tail
    # counted as outside: an over-count, on a line the parser refuses anyway).
    outside = b"".join(marks.split(b'"')[::2]) if quotes else marks
    return 1 + len(outside)


def _char_width(line: bytes) -> int:
    """Bytes a character may take in the strings ``line`` parses to: 1, 2 or 4 (CPython stores
    a str at the width of its widest character). A str never has more characters than the
    line has bytes, so ``width * len(line)`` bounds the strings' contents."""
    escaped = line.find(b"\\") >= 0 and b"\\u" in line
    if line.isascii() and not escaped:
        return 1
    wide = line.translate(None, _BELOW_TWO_BYTE)
    if wide.translate(None, _BELOW_ASTRAL) or (escaped and _ESCAPE_ASTRAL.search(line)):
        return 4
    if wide or (escaped and _ESCAPE_TWO_BYTE.search(line)):
        return 2
    return 1
