"""Newline-delimited JSON framing for stdio, sans-IO: bytes in, complete lines out.

The splitter never holds more than ``max_line`` bytes of one line: once a line grows past the
limit it is reported as :class:`Oversized` and the rest of it is discarded as it streams in,
up to and including its newline.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from fsnotes.protocol.limits import MAX_LINE_BYTES


@dataclass(frozen=True)
class Oversized:
    """A line longer than the limit was skipped (reported once, when it crossed the limit)."""

    limit: int


class LineSplitter:
    """Split a byte stream into lines of at most ``max_line`` bytes (newline excluded)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._discarding = False

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Consume ``data``; return the complete lines (and skip markers) it finished."""
        out: list[bytes | Oversized] = []
        start = 0
        while start < len(data):
            nl = data.find(b"\n", start)
            end = len(data) if nl < 0 else nl
            if self._discarding:
                if nl >= 0:
                    self._discarding = False
            else:
                if len(self._buf) + (end - start) > self.max_line:
                    self._buf.clear()
                    out.append(Oversized(self.max_line))
                    self._discarding = nl < 0
                else:
                    self._buf += data[start:end]
                    if nl >= 0:
                        line = bytes(self._buf).rstrip(b"\r")
                        self._buf.clear()
                        if line.strip():
                            out.append(line)
            if nl < 0:
                break
            start = nl + 1
        return out

    def end(self) -> list[bytes | Oversized]:
        """At end of input: a final line without a newline still counts as a message."""
        line = bytes(self._buf)
        self._buf.clear()
        self._discarding = False
        return [line] if line.strip() else []


def _finite(value: Any) -> Any:
    # NaN and +-Infinity are not JSON: null, as JSON.stringify writes them.
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def encode_message(message: dict[str, Any]) -> bytes:
    """One compact JSON line, UTF-8, newline-terminated (JSON escapes any newline in strings).

    Strings holding lone surrogates (a client may send ``"\\ud800"``) cannot be UTF-8 encoded,
    so such a message falls back to ASCII-escaped JSON, which is still valid. Non-finite
    numbers (a handler's inf or NaN) are written as null, never as the non-JSON ``Infinity``.
    """
    try:
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        message = _finite(message)
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = json.dumps(message, separators=(",", ":")).encode("ascii")
    # The text goes before the newline is added (a copy): a large answer is then held twice at
    # most, not three times.
    del text
    return data + b"\n"
