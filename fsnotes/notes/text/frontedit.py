"""Setting or removing one frontmatter key, leaving every other byte of the note as it was.

Pure functions over text; no file access, no YAML library (see :mod:`fsnotes.notes.text.markdown`
for why). The key's own lines (its ``key:`` line and the indented or ``- item`` lines below
it) are the only ones replaced or removed; a new key goes at the end of the block; a note
without frontmatter gets a block made for the key.

Values are YAML scalars (strings, integers, decimals, true/false, null) or flat lists of
them. A string is written plain when YAML and note apps read it back as the same string, and
in single quotes otherwise, a quote in them doubled (``'yes'``, ``'3'``, ``'a: b'``,
``'it''s: ok'``; ``it's`` itself stays plain); ISO dates (``2026-12-03``) are written plain,
as note apps write them. Refused, with a sentence that
says why: keys that are not a plain name, values with line breaks or control characters,
values or lists over the limits below. After the edit the block is read again with the
reader the index uses, and the edit is refused unless every other key reads as before, the
key reads as the value given and the body is untouched: a value that would break the block
is never written.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from fsnotes.notes.text.markdown import frontmatter_close, split_frontmatter

FrontmatterScalar = str | int | float | bool | None
FrontmatterValue = FrontmatterScalar | list[str | int | float | bool]
FrontmatterOp = Literal["set", "remove"]

# A key is a name, not a sentence: letters, digits, '_', '-', '.', single inner spaces.
MAX_KEY_CHARS = 100
# Frontmatter is a header, not a document: longer text belongs in the note's body.
MAX_VALUE_CHARS = 1_000
MAX_LIST_ITEMS = 100
# The reader reads an integer of at most 18 digits as a number (it must fit in 64 bits).
MAX_INT_DIGITS = 18

_KEY = re.compile(r"\w(?:[\w.-]| (?=[\w.-]))*")
# Anything YAML reads as another type, or the reader as a number, if written plain.
_RESERVED = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}
_NUMBERISH = re.compile(r"[-+]?(?:\d|\.\d|\.inf|\.nan)|0[xob]", re.IGNORECASE)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_INDICATORS = set("-?:,[]{}#&*!|>'\"%@`")
# In a flow list the reader also takes a quote anywhere in an item as opening a quoted part.
_FLOW_CHARS = set(",[]{}'\"")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
_DECIMAL = re.compile(r"-?\d+\.\d+")


class FrontmatterError(ValueError):
    """A key or value that cannot be written safely, or a key that is not there."""


def check_key(key: str) -> str:
    if len(key) > MAX_KEY_CHARS or not _KEY.fullmatch(key):
        raise FrontmatterError(
            f"The frontmatter key {key[:MAX_KEY_CHARS]!r} is not a plain name; use letters, "
            f"digits, '_', '-', '.' and single spaces (at most {MAX_KEY_CHARS} characters)."
        )
    return key


def _string(value: str, *, in_list: bool) -> str:
    if len(value) > MAX_VALUE_CHARS:
        raise FrontmatterError(
            f"That frontmatter value is {len(value)} characters; at most {MAX_VALUE_CHARS} "
            "fit in a frontmatter value (put longer text in the note's body)."
        )
    if _CONTROL.search(value):
        raise FrontmatterError(
            "Frontmatter values are one line of text: no line breaks, tabs or other control "
            "characters."
        )
    plain = (
        value != ""
        and value == value.strip()
        and value[0] not in _INDICATORS
        and ": " not in value
        and " #" not in value
        and not value.endswith(":")
        and value.casefold() not in _RESERVED
        and (not _NUMBERISH.match(value) or _ISO_DATE.fullmatch(value) is not None)
        and not (in_list and _FLOW_CHARS.intersection(value))
    )
    return value if plain else "'" + value.replace("'", "''") + "'"


def _scalar(value: FrontmatterScalar, *, in_list: bool = False) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if len(str(abs(value))) > MAX_INT_DIGITS:
            raise FrontmatterError(
                f"Integers of more than {MAX_INT_DIGITS} digits are not read back as numbers; "
                "send it as a string."
            )
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        if not math.isfinite(value) or not _DECIMAL.fullmatch(text):
            raise FrontmatterError(
                f"The number {text} cannot be written as a plain decimal; send it as a string."
            )
        return text
    return _string(value, in_list=in_list)


def render(key: str, value: FrontmatterValue, *, block_list: bool = False) -> list[str]:
    """The lines (without newlines) that set ``key`` to ``value``; a list in block style
    (``- item`` lines) when ``block_list``, else in flow style (``[a, b]``)."""
    if not isinstance(value, list):
        return [f"{key}: {_scalar(value)}"]
    if len(value) > MAX_LIST_ITEMS:
        raise FrontmatterError(
            f"That list has {len(value)} items; a frontmatter list holds at most {MAX_LIST_ITEMS}."
        )
    if block_list and value:
        return [f"{key}:", *(f"  - {_scalar(item)}" for item in value)]
    return [f"{key}: [" + ", ".join(_scalar(item, in_list=True) for item in value) + "]"]


def _key_of(line: str) -> str | None:
    """The key a block line sets, as the reader sees it (None: not a key line)."""
    if not line.strip() or line[:1].isspace() or line.lstrip().startswith("#"):
        return None
    stripped = line.strip()
    if stripped.startswith("- ") or stripped == "-":
        return None
    key, sep, _value = line.partition(":")
    key = key.strip()
    return key if sep and key else None


def _span(block: list[str], start: int) -> int:
    """The index after the last line that belongs to the key on ``block[start]``: indented
    lines and ``- item`` lines below it (blank lines between them included)."""
    end = start + 1
    j = start + 1
    while j < len(block):
        line = block[j].rstrip("\r")
        stripped = line.strip()
        if not stripped:
            j += 1
            continue
        if line[:1].isspace() or stripped.startswith("- ") or stripped == "-":
            j += 1
            end = j
            continue
        break
    return end


def _reads_as(value: FrontmatterValue) -> object:
    # What the reader makes of a written value: an empty list reads as no value.
    return None if value == [] else value


def edit(text: str, key: str, op: FrontmatterOp, value: FrontmatterValue = None) -> str:
    """``text`` with frontmatter ``key`` set to ``value`` or removed (see the module
    docstring). :class:`FrontmatterError` when the key or value cannot be written safely, or
    when a key to remove is not there; nothing is changed then."""
    check_key(key)
    before, body, _start = split_frontmatter(text)
    lines = text.split("\n")
    close = frontmatter_close(lines)
    nl = "\r\n" if (lines[0].endswith("\r") if close is not None else "\r\n" in text) else "\n"
    if close is None:
        if op == "remove":
            raise FrontmatterError(f"The note has no frontmatter, so no key {key!r} to remove.")
        new_lines = ["---", *render(key, value), "---"]
        result = nl.join(new_lines) + nl + text
    else:
        block = lines[1:close]
        at = [i for i, line in enumerate(block) if _key_of(line.rstrip("\r")) == key]
        if len(at) > 1:
            raise FrontmatterError(
                f"The frontmatter sets {key!r} {len(at)} times; fix it with an exact text "
                "edit (oldText) first."
            )
        cr = "\r" if nl == "\r\n" else ""
        if op == "remove":
            if not at:
                raise FrontmatterError(
                    f"The frontmatter has no key {key!r}; its keys: "
                    f"{', '.join(repr(k) for k in before) or 'none'}."
                )
            block = block[: at[0]] + block[_span(block, at[0]) :]
        elif at:
            end = _span(block, at[0])
            was_block_list = end > at[0] + 1 and block[at[0]].rstrip("\r").rstrip().endswith(":")
            new = [line + cr for line in render(key, value, block_list=was_block_list)]
            block = block[: at[0]] + new + block[end:]
        else:
            block = block + [line + cr for line in render(key, value)]
        result = "\n".join([lines[0], *block, *lines[close:]])
    _verify(result, before, body, key, op, value)
    return result


def _verify(
    result: str,
    before: dict[str, object],
    body: str,
    key: str,
    op: FrontmatterOp,
    value: FrontmatterValue,
) -> None:
    expected = dict(before)
    if op == "remove":
        expected.pop(key, None)
    else:
        expected[key] = _reads_as(value)
    after, new_body, _start = split_frontmatter(result)
    if after != expected or new_body != body:
        raise FrontmatterError(
            f"Setting {key!r} that way would change how the rest of the frontmatter reads; "
            "nothing was written. Edit the frontmatter with an exact text edit (oldText) instead."
        )


__all__ = [
    "MAX_KEY_CHARS",
    "MAX_LIST_ITEMS",
    "MAX_VALUE_CHARS",
    "FrontmatterError",
    "FrontmatterValue",
    "check_key",
    "edit",
    "render",
]
