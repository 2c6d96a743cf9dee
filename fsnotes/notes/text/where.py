"""The ``where`` filter of notes_list and notes_search: frontmatter keys and values.

One rule, used by the index when it stores a note's frontmatter
(:mod:`fsnotes.notes.index.noteindex`) and by the filter when a caller asks for it, so the
two cannot disagree:

* a note matches ``where: {key: value, ...}`` when, for every key, its frontmatter has that
  key (exact, case-sensitive, as YAML keys are) with that value, or, for a list, that value
  among its items;
* values are compared as text after both sides are read the way the frontmatter is read
  (:mod:`fsnotes.notes.text.markdown`): case-insensitively, surrounding spaces ignored;
  ``yes``/``no``/``true``/``false`` are booleans (``true`` and ``yes`` match each other),
  integers are numbers (``007`` matches ``7``), ``null``, ``~`` and an empty value are empty
  (``null`` or ``""`` matches them);
* nested YAML that the frontmatter reader keeps as text is compared as that text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fsnotes.notes.text.markdown import (
    _scalar as read_scalar,
)  # how the frontmatter reads one value

# A where filter names at most this many keys (each is one more index lookup or FTS term).
MAX_WHERE_KEYS = 8
# Values longer than this are not stored for the filter, and a filter value may not be
# longer: a frontmatter value is a word or a line, and the index keeps every stored pair in
# a b-tree (a long raw value would only cost space).
MAX_WHERE_VALUE_CHARS = 500
# Frontmatter keys longer than this are not stored either (the same reason).
MAX_WHERE_KEY_CHARS = 200

Scalar = str | int | float | bool | None


def canonical(value: Any) -> str:
    """The text a frontmatter value (already read) is compared as."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return str(value).strip().casefold()


def query_value(value: Scalar) -> str:
    """The text a filter value is compared as: a string is read as frontmatter reads it."""
    if isinstance(value, str):
        return canonical(read_scalar(value.strip()))
    return canonical(value)


def pairs(frontmatter: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every (key, value) the index stores for a note: one per scalar, one per list item."""
    seen: set[tuple[str, str]] = set()
    for key, value in frontmatter.items():
        if len(key) > MAX_WHERE_KEY_CHARS:
            continue
        for item in value if isinstance(value, list) else [value]:
            text = canonical(item)
            if len(text) <= MAX_WHERE_VALUE_CHARS and (key, text) not in seen:
                seen.add((key, text))
                yield key, text


def conditions(where: Mapping[str, Scalar] | None) -> list[tuple[str, str]]:
    """A caller's filter as sorted (key, value) pairs (validated by the argument model)."""
    if not where:
        return []
    return sorted((key, query_value(value)) for key, value in where.items())


__all__ = [
    "MAX_WHERE_KEYS",
    "MAX_WHERE_VALUE_CHARS",
    "canonical",
    "conditions",
    "pairs",
    "query_value",
]
