"""A note's sections: its headings, and edits addressed by a heading path.

Pure functions over text; no file access. A heading is an ATX heading (``## Shed``) or a
setext heading (a paragraph underlined with ``===`` for level 1 or ``---`` for level 2),
as CommonMark defines them, with these simplifications (a note is prose, not a test suite):

- Lines of code blocks, fenced (``` or ~~~, three or more, closed by the same character
  at least as many times, or running to the end of the note or of their list item or block
  quote) or indented (four columns, not continuing a paragraph), as
  :mod:`fsnotes.notes.text.code` finds them, and the frontmatter are never headings.
- A setext underline counts only below a paragraph: not below a list item or a block quote
  (or their lazy continuation lines), where ``---`` is a thematic break.
- HTML blocks are not recognised: a ``# line`` inside one counts as a heading.

A heading path names a heading by its text and, optionally, the headings that enclose it,
outermost first, separated by ``>``: ``Projects > Shed`` is a heading "Shed" somewhere
inside the section of a heading "Projects" (not necessarily its direct child). Texts are
compared with whitespace collapsed and case ignored; leading ``#`` marks in a path part are
ignored. A heading whose text contains ``>`` cannot be named.

A heading's section runs from the line after the heading to the next heading of the same or
a higher level (fewer ``#``), or to the end of the note: it includes its sub-sections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from fsnotes.notes.text.code import line_kinds
from fsnotes.notes.text.markdown import split_frontmatter

SectionOp = Literal["replace", "append", "prepend"]

# Headings named in an error message (missing or ambiguous heading): enough to pick from,
# short enough to read; the rest are counted.
MAX_CANDIDATES_SHOWN = 20

_ATX = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)(.*)")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
# Lines that open a container (list item, block quote) or a thematic break: a ``---`` below
# them is not a setext underline.
_CONTAINER = re.compile(r" {0,3}(?:[-+*][ \t]|[-+*]$|\d{1,9}[.)](?:[ \t]|$)|>)")
_BREAK = re.compile(r" {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})")
_SPACES = re.compile(r"\s+")


class SectionError(ValueError):
    """A heading path that names no heading or several; the message names the candidates."""


@dataclass(frozen=True)
class Heading:
    level: int  # 1-6
    text: str  # whitespace collapsed
    start: int  # index of its first line (a setext heading's first paragraph line)
    end: int  # index of the line after it (after a setext underline)
    path: tuple[str, ...]  # the texts of the headings enclosing it, outermost first, and its own

    @property
    def line(self) -> int:
        """1-based line number of the heading in the note."""
        return self.start + 1

    def label(self) -> str:
        return " > ".join(self.path)


def split_lines(text: str) -> list[str]:
    """The note's lines, each with its ``\\n`` (the last one without, when the note does not
    end with one). Only ``\\n`` ends a line, as for the frontmatter reader (``\\r`` stays in
    the line; ``str.splitlines`` would also split at form feeds and U+2028)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _normal(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def headings(text: str) -> list[Heading]:
    """Every heading of the note's body, in order (see the module docstring for what is one)."""
    lines = split_lines(text)
    _fm, _body, body_start_line = split_frontmatter(text)
    found: list[tuple[int, str, int, int]] = []  # level, text, start, end
    para_start: int | None = None  # first line of the paragraph being read
    in_container = False  # lines since a list item or block quote, until a blank line
    first = body_start_line - 1
    # Code blocks, fenced or indented, as fsnotes.notes.text.code finds them (the one
    # definition links and tags use too): their lines are never headings.
    kinds = line_kinds([line.rstrip("\n") for line in lines[first:]])
    for i in range(first, len(lines)):
        line = lines[i].rstrip("\n").rstrip("\r")
        if kinds[i - first][0] == "code":
            para_start = None
            continue
        if not line.strip():
            para_start, in_container = None, False
            continue
        atx = _ATX.fullmatch(line)
        if atx:
            content = atx.group(2).strip()
            content = _ATX_CLOSE.sub("", content).strip()
            found.append((len(atx.group(1)), _normal(content), i, i + 1))
            para_start, in_container = None, False
            continue
        underline = _SETEXT.fullmatch(line)
        if underline and para_start is not None and not in_container:
            level = 1 if underline.group(1)[0] == "=" else 2
            words = " ".join(lines[j].strip() for j in range(para_start, i))
            found.append((level, _normal(words), para_start, i + 1))
            para_start = None
            continue
        if _BREAK.fullmatch(line):
            para_start = None
            continue
        if _CONTAINER.match(line):
            para_start, in_container = None, True
            continue
        # An indented line that is not code continues a list item (or a paragraph): it
        # starts no paragraph of its own that a later underline could make a heading.
        if para_start is None and not in_container and not line.startswith(("    ", "\t")):
            para_start = i
    return _with_paths(found)


def _with_paths(found: Sequence[tuple[int, str, int, int]]) -> list[Heading]:
    out: list[Heading] = []
    stack: list[tuple[int, str]] = []  # enclosing (level, text)
    for level, text, start, end in found:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text))
        out.append(Heading(level, text, start, end, tuple(t for _l, t in stack)))
    return out


def parse_path(path: str) -> list[str]:
    """The parts of a heading path, normalised for comparison (casefolded)."""
    parts = [_normal(part.strip().lstrip("#")).casefold() for part in path.split(">")]
    if not parts or any(not p for p in parts):
        raise SectionError(
            f"The heading path {path!r} has an empty part; write the heading's text, "
            "optionally after its parent headings and '>', e.g. 'Projects > Shed'."
        )
    return parts


def _matches(heading: Heading, wanted: Sequence[str]) -> bool:
    if heading.text.casefold() != wanted[-1]:
        return False
    # The other parts must name enclosing headings, in order (not necessarily adjacent).
    enclosing = iter(t.casefold() for t in heading.path[:-1])
    return all(any(t == part for t in enclosing) for part in wanted[:-1])


def _listing(items: Sequence[Heading]) -> str:
    shown = ", ".join(f"'{h.label()}' (line {h.line})" for h in items[:MAX_CANDIDATES_SHOWN])
    more = len(items) - MAX_CANDIDATES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def find(text: str, path: str) -> tuple[Heading, int, list[Heading]]:
    """The one heading ``path`` names, the index of the line where its section ends, and
    every heading of the note. :class:`SectionError` naming the candidates when no heading
    or several match."""
    wanted = parse_path(path)
    every = headings(text)
    matching = [h for h in every if _matches(h, wanted)]
    if not matching:
        if not every:
            raise SectionError(f"No heading matches {path!r}: the note has no headings.")
        same_text = [h for h in every if h.text.casefold() == wanted[-1]]
        candidates = same_text or every
        what = "headings with that text" if same_text else "the note's headings"
        raise SectionError(f"No heading matches {path!r}; {what}: {_listing(candidates)}.")
    if len(matching) > 1:
        raise SectionError(
            f"The heading path {path!r} matches {len(matching)} headings: "
            f"{_listing(matching)}; give more of its path (its parent headings, with '>')."
        )
    target = matching[0]
    after = every.index(target) + 1
    end = next(
        (h.start for h in every[after:] if h.level <= target.level),
        len(split_lines(text)),
    )
    return target, end, every


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _block(new: str, nl: str) -> list[str]:
    """``new`` as whole lines in the note's newline style (a final newline added)."""
    if not new:
        return []
    if nl == "\r\n":
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    if not new.endswith("\n"):
        new += nl
    return split_lines(new)


def _blank(line: str) -> bool:
    return not line.strip()


def edit(text: str, path: str, op: SectionOp, new: str) -> str:
    """``text`` with the section under the heading ``path`` changed; nothing else changes.

    - ``replace``: the section's content (its sub-sections included) becomes ``new``; the
      blank lines that opened and closed it stay, and so does the heading.
    - ``append``: ``new`` goes after the section's last non-blank line (before the blank
      lines that separate it from the next heading).
    - ``prepend``: ``new`` goes before the section's first non-blank line (after the heading
      and the blank lines below it).

    ``new`` is written as whole lines, in the note's newline style.
    """
    heading, end, _every = find(text, path)
    lines = split_lines(text)
    nl = _newline(text)
    block = _block(new, nl)
    first = heading.end
    # The content: the section's lines without its leading and trailing blank lines.
    lo, hi = first, end
    while lo < hi and _blank(lines[lo]):
        lo += 1
    while hi > lo and _blank(lines[hi - 1]):
        hi -= 1
    if lo == hi:  # an empty section: new content goes right below the heading
        lo = hi = first
    if op == "replace":
        start, stop = lo, hi
    elif op == "append":
        start = stop = hi
    else:
        start = stop = lo
    if start > 0 and not lines[start - 1].endswith("\n"):
        lines[start - 1] += nl  # the note ended without a newline right there
    return "".join(lines[:start] + block + lines[stop:])
