"""Where a note's code is: code blocks (fenced and indented) and code spans, as CommonMark
defines them. Links, tags and headings are looked for only outside it, and this module is its
one definition (:mod:`fsnotes.notes.text.links`, :mod:`fsnotes.notes.text.markdown` and
:mod:`fsnotes.notes.text.sections` all ask it).

Pure functions over text. The block structure is read line by line as CommonMark's block
parser reads it, tracking only what decides where code is:

* a **fenced code block** opens with three or more backticks or tildes (indented at most
  three columns; a backtick fence's info string holds no backtick) and closes with a run of
  the same character at least as long and nothing else on the line, or with its container
  (the list item or block quote it opened in), or at the end of the note;
* an **indented code block** is a line indented four columns or more (a tab stops at the
  next multiple of four) beyond its container's content that does not continue a
  paragraph: so only after a blank line, a heading, a fence, a thematic break or at the
  start. A list item's content is indented by the item's width first: ``- item``, a blank
  line and ``    more`` is more of the item; ``      code`` is code in the item;
* **block quotes** (``>``) and **list items** (``-``, ``+``, ``*``, ``1.``, ``1)``) are the
  containers, with CommonMark's lazy continuation of a paragraph;
* a **code span** opens with a run of N backticks (not preceded by a backslash) and closes
  at the next run of exactly N backticks in the same paragraph or heading, across its line
  breaks; a run with no partner is plain text.

Limits, on purpose (notes are prose, not a test suite): HTML blocks and link reference
definitions are read as paragraphs, so text in an HTML block counts as text; code spans do
not yield to autolinks or raw HTML that would contain their backticks.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence
from typing import Literal, NamedTuple

# What a line is: part of a code block, a line of a paragraph or heading (where code spans
# and links are), or neither (blank, a thematic break, a setext underline).
Kind = Literal["code", "text", "none"]

TAB_STOP = 4
# Four columns of indentation make indented code (CommonMark's rule).
CODE_INDENT = 4
# A list marker is followed by one to four columns before its content; five or more mean
# the content is indented code, and the item's width is the marker and one column.
MAX_MARKER_GAP = 4

_FENCE = re.compile(r"(`{3,}|~{3,})(.*)")
_MARKER = re.compile(r"(?:[-+*]|([0-9]{1,9})[.)])(?=[ \t]|$)")
_BREAK = re.compile(r"(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})")
_SETEXT = re.compile(r"(?:=+|-+)[ \t]*")
_ATX = re.compile(r"#{1,6}(?:[ \t]|$)")
_TICKS = re.compile(r"`+")
_NOT_NEWLINE = re.compile(r"[^\n]")
# The characters a line can start with when it opens a block, is indented or blank, or is a
# setext underline; a top-level line starting with any other is a paragraph's.
_SPECIAL_FIRST = frozenset(" \t\r>-+*_#`~=0123456789")


class _Box(NamedTuple):
    """An open container: a block quote, or a list item whose content starts ``width``
    columns into its container's content."""

    quote: bool
    width: int


def _skip_space(line: str, pos: int, col: int) -> tuple[int, int]:
    """The position and column of the first character from ``pos`` (at column ``col``) that
    is not a space or a tab."""
    n = len(line)
    while pos < n:
        ch = line[pos]
        if ch == " ":
            col += 1
        elif ch == "\t":
            col += TAB_STOP - col % TAB_STOP
        else:
            break
        pos += 1
    return pos, col


class _Line:
    """A line as its containers consume it: ``pos`` and ``col`` are its first character that
    is not a space or tab, ``base`` the column where the current container's content starts."""

    __slots__ = ("base", "col", "line", "pos")

    def __init__(self, line: str) -> None:
        self.line = line
        self.base = 0
        self.pos, self.col = _skip_space(line, 0, 0)

    @property
    def indent(self) -> int:
        return self.col - self.base

    @property
    def blank(self) -> bool:
        return self.pos >= len(self.line)

    def take_quote(self) -> None:
        """Consume the '>' at ``pos`` and the one column of space that may follow it."""
        after = self.col + 1
        self.pos, self.col = _skip_space(self.line, self.pos + 1, after)
        self.base = after + 1 if self.col > after else after

    def take_marker(self, end: int, width: int) -> None:
        """Consume a list marker ending at ``end``: the item's content starts ``width``
        columns into the current content."""
        self.pos, self.col = _skip_space(self.line, end, self.col + end - self.pos)
        self.base += width


def _marker(ln: _Line, interrupting: bool) -> tuple[int, int] | None:
    """A list item's marker at ``ln``: (where it ends, the item's width), or None.
    ``interrupting``: a paragraph is open in this container, which an empty item or an
    ordered one not starting at 1 cannot interrupt."""
    m = _MARKER.match(ln.line, ln.pos)
    if m is None:
        return None
    end = m.end()
    marker_end = ln.col + end - ln.pos
    after_pos, after_col = _skip_space(ln.line, end, marker_end)
    empty = after_pos >= len(ln.line)
    if interrupting and (empty or (m.group(1) is not None and int(m.group(1)) != 1)):
        return None
    gap = after_col - marker_end
    if empty or gap > MAX_MARKER_GAP:
        gap = 1
    return end, ln.indent + (marker_end - ln.col) + gap


def line_kinds(lines: Sequence[str]) -> list[tuple[Kind, bool]]:
    """For each line of a note's body (without its ``\\n``): what it is, and whether it
    starts a run of text (a paragraph or a heading; code spans never cross runs)."""
    out: list[tuple[Kind, bool]] = []
    stack: list[_Box] = []
    para = False  # a paragraph is open in the innermost container
    fence: tuple[str, int] | None = None  # the open fence's character and length
    empty_item = False  # the last line opened a list item and nothing followed its marker
    for raw in lines:
        if not stack and fence is None:
            # The common lines, at the top level, read without the scan: an empty one, and
            # one starting with a letter or the like (a paragraph's: it opens no block).
            if not raw:
                out.append(("none", False))
                para = False
                continue
            if raw[0] not in _SPECIAL_FIRST:
                out.append(("text", not para))
                para = True
                continue
        elif not any(box.quote for box in stack):
            # Lines in list items (or fenced code at the top level): a blank one continues
            # them all; one starting with spaces and a letter or the like opens no block,
            # and the items it continues follow from its indentation.
            text = raw.lstrip(" ")
            if fence is not None:
                if not stack and (not text or text[0] != fence[0] or len(raw) - len(text) > 3):
                    out.append(("code", False))  # (not a closing fence)
                    continue
            elif not text.strip(" \t\r"):
                if empty_item:  # a second blank line ends an item that began blank
                    stack.pop()
                out.append(("none", False))
                para = empty_item = False
                continue
            elif text[0] not in _SPECIAL_FIRST:
                kind, new_run = _in_items(stack, len(raw) - len(text), para)
                out.append((kind, new_run))
                para = kind == "text"
                empty_item = False
                continue
        ln = _Line(raw.rstrip("\r"))
        matched = _continued(ln, stack)
        if fence is not None:
            if matched == len(stack):
                out.append(("code", False))
                if ln.indent < CODE_INDENT:
                    m = _FENCE.fullmatch(ln.line, ln.pos)
                    if m and m[1][0] == fence[0] and len(m[1]) >= fence[1] and not m[2].strip():
                        fence = None
                continue
            fence = None  # its container ended, and the fence with it
        if ln.blank:
            # A list item can begin with at most one blank line: a second one ends it.
            if empty_item and matched == len(stack):
                stack.pop()
            del stack[matched:]  # (a blank line continues no block quote)
            para = empty_item = False
            out.append(("none", False))
            continue
        lazy = para and matched < len(stack)
        if matched < len(stack) and not lazy:
            del stack[matched:]
            para = False
        kind, new_run, fence, para, empty_item = _leaf(ln, stack, matched, para, lazy)
        out.append((kind, new_run))
    return out


def _in_items(stack: list[_Box], indent: int, para: bool) -> tuple[Kind, bool]:
    """What a line indented ``indent`` spaces and starting with plain text is under the open
    list items ``stack`` (the ones it does not continue are closed), ``para`` telling
    whether a paragraph is open: (its kind, whether it starts a run of text)."""
    matched, base = 0, 0
    for box in stack:
        if indent - base < box.width:
            break
        base += box.width
        matched += 1
    if para:
        return "text", False  # a continuation (lazy when it continues fewer items)
    del stack[matched:]
    if indent - base >= CODE_INDENT:
        return "code", False
    return "text", True


def _continued(ln: _Line, stack: Sequence[_Box]) -> int:
    """How many of the open containers ``ln`` continues (consuming their prefixes)."""
    matched = 0
    for box in stack:
        if box.quote:
            if ln.indent >= CODE_INDENT or ln.blank or ln.line[ln.pos] != ">":
                break
            ln.take_quote()
        elif not ln.blank:
            if ln.indent < box.width:
                break
            ln.base += box.width
        matched += 1
    return matched


def _block_start(ln: _Line, interrupting: bool) -> tuple[str, tuple[int, int]] | None:
    """The block ``ln`` starts, if any but a paragraph: ('quote' | 'break' | 'heading',
    unused) or ('item', (marker end, width)) or ('fence', (fence character, length))."""
    line, pos = ln.line, ln.pos
    first = line[pos]
    if first == ">":
        return "quote", (0, 0)
    if first in "-_*" and _BREAK.fullmatch(line, pos):
        return "break", (0, 0)
    if first in "-+*0123456789":
        found = _marker(ln, interrupting)
        return None if found is None else ("item", found)
    if first == "#":
        return ("heading", (0, 0)) if _ATX.match(line, pos) else None
    if first in "`~":
        m = _FENCE.match(line, pos)
        if m is not None and not (first == "`" and "`" in m[2]):
            return "fence", (ord(first), len(m[1]))
    return None


def _leaf(
    ln: _Line, stack: list[_Box], matched: int, para: bool, lazy: bool
) -> tuple[Kind, bool, tuple[str, int] | None, bool, bool]:
    """The containers ``ln`` opens (pushed on ``stack``) and its leaf: (its kind, whether
    it starts a run of text, the fence it opens, whether a paragraph is open after it,
    whether it opened a list item with nothing after the marker). ``lazy``: the line did
    not continue every container, but may still continue the open paragraph."""
    opened = False
    while True:
        if ln.blank:  # after a marker or '>' with nothing behind it
            return "none", False, None, False, opened and not stack[-1].quote
        interrupting = para and not opened
        if ln.indent >= CODE_INDENT:
            if interrupting:
                return "text", False, None, True, False  # a paragraph's continuation
            return "code", False, None, False, False
        if (
            interrupting
            and not lazy
            and ln.line[ln.pos] in "=-"
            and _SETEXT.fullmatch(ln.line, ln.pos)
        ):
            return "none", False, None, False, False  # the paragraph was a setext heading
        # A list item may not interrupt a paragraph in the same container if empty or
        # ordered from another number than 1; a lazy line is in no paragraph's container.
        start = _block_start(ln, interrupting and not lazy)
        if start is None:
            if interrupting:
                return "text", False, None, True, False  # continued (lazily, if so)
            return "text", True, None, True, False
        if lazy:  # not a continuation after all: the containers it did not continue end
            del stack[matched:]
            lazy = False
        what, (a, b) = start
        if what == "break":
            return "none", False, None, False, False
        if what == "heading":
            return "text", True, None, False, False  # an ATX heading: a run of its own
        if what == "fence":
            return "code", False, (chr(a), b), False, False
        if what == "quote":
            ln.take_quote()
            stack.append(_Box(True, 0))
        else:
            ln.take_marker(a, b)
            stack.append(_Box(False, b))
        opened, para = True, False


def _spans(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """Append the code spans of ``text[start:end]`` (one run of text) to ``out``."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text, start, end)]
    if len(runs) < 2:
        return
    by_length: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(runs):
        by_length.setdefault(b - a, []).append(i)
    floor = start  # backslashes before this are inside the last span: not escapes
    i = 0
    while i < len(runs):
        a, b = runs[i]
        slashes = 0
        while a - slashes - 1 >= floor and text[a - slashes - 1] == "\\":
            slashes += 1
        if slashes % 2:
            a += 1  # an escaped backtick is text; the rest of the run may still open
        same = by_length.get(b - a, [])
        k = bisect.bisect_right(same, i)
        if b > a and k < len(same):
            close = runs[same[k]][1]
            out.append((a, close))
            floor = close
            i = same[k] + 1
        else:
            i += 1


# Notes at least this long are read for code one at a time (in every thread of the process).
# A 4 MiB note dense in code spans is read as tens of thousands of small objects (its lines,
# the backtick runs, the ranges): eight worker threads doing that at once left about 40 MiB
# more resident after they finished (the allocator's arenas, fragmented) than one at a time
# does, which broke the stdio answer budget (tests/interop/test_stdio_robustness.py). Reading
# such a note takes tens of ms, so taking turns costs little; notes below this never wait.
LARGE_NOTE_CHARS = 256 * 1024
_LARGE = threading.Lock()


def code_ranges(body: str) -> list[tuple[int, int]]:
    """See :func:`_code_ranges`; a large note waits for any other being read (see
    :data:`LARGE_NOTE_CHARS`)."""
    if len(body) < LARGE_NOTE_CHARS:
        return _code_ranges(body)
    with _LARGE:
        return _code_ranges(body)


def _code_ranges(body: str) -> list[tuple[int, int]]:
    """Every piece of code in ``body`` (a note's text after its frontmatter) as
    ``(start, end)`` offsets, in order and apart: the code blocks' lines (fences
    included), consecutive code lines as one range with the newlines between them (a
    4 MiB note of code is then a few ranges, not one tuple per line: those were what a
    server reading several such notes at once kept in memory), then the code spans
    (backticks included)."""
    # Without a backtick, a '~~~' fence, four spaces in a row or a tab (what indented code
    # needs), a note has no code and is not read line by line: most notes (the fast path;
    # substring tests, several times quicker than one regex pass over the text).
    if "`" not in body and "~~~" not in body and "    " not in body and "\t" not in body:
        return []
    lines = body.split("\n")
    blocks: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    at = 0
    run: int | None = None  # where the open run of text started
    for line, (kind, new_run) in zip(lines, line_kinds(lines), strict=True):
        if run is not None and (kind != "text" or new_run):
            if body.find("`", run, at - 1) >= 0:
                _spans(body, run, at - 1, spans)
            run = None
        if kind == "code" and line:
            if blocks and blocks[-1][1] == at - 1:  # the line after the last code line
                blocks[-1] = (blocks[-1][0], at + len(line))
            else:
                blocks.append((at, at + len(line)))
        elif kind == "text" and run is None:
            run = at
        at += len(line) + 1
    if run is not None and body.find("`", run) >= 0:
        _spans(body, run, len(body), spans)
    return sorted(blocks + spans)


def mask(body: str, ranges: Sequence[tuple[int, int]] | None = None) -> str:
    """``body`` with its code (``ranges``, by default :func:`code_ranges`) blanked: each
    character a space, newlines kept, so that an offset into the result is the same offset
    into ``body``."""
    return _blanked(body, code_ranges(body) if ranges is None else ranges, keep_length=True)


def prose(body: str, ranges: Sequence[tuple[int, int]] | None = None) -> str:
    """``body`` without its code, for text that is read rather than pointed into: as
    :func:`mask`, but a one-line code span becomes one space."""
    return _blanked(body, code_ranges(body) if ranges is None else ranges, keep_length=False)


def _blanked(body: str, ranges: Sequence[tuple[int, int]], *, keep_length: bool) -> str:
    if not ranges:
        return body
    out: list[str] = []
    at = 0
    for start, end in ranges:
        out.append(body[at:start])
        piece = body[start:end]
        if keep_length or body[start] != "`" or "\n" in piece:
            out.append(_NOT_NEWLINE.sub(" ", piece))
        else:
            out.append(" ")
        at = end
    out.append(body[at:])
    return "".join(out)


__all__ = ["Kind", "code_ranges", "line_kinds", "mask", "prose"]
