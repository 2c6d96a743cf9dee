"""What a note says about itself: frontmatter, title, tags and links.

Pure functions over text; no file access. The frontmatter reader understands the subset of
YAML that note apps write (``key: value`` scalars, quoted ones unescaped as YAML does,
``[a, b]`` flow lists and ``- item`` block lists, comments); anything else is kept as a raw
string rather than guessed at. There is no
YAML dependency on purpose: a full YAML loader is a large parser to run on untrusted files,
and notes need only this subset.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from fsnotes.notes.text import code
from fsnotes.notes.text.links import Occurrence, occurrences

FRONTMATTER_OPEN = "---"
FRONTMATTER_CLOSE = ("---", "...")
# Frontmatter is a header, not a document: past this many lines we stop looking for its end
# and treat the file as having none (keeps a malformed file from costing a full scan).
MAX_FRONTMATTER_LINES = 500

# Any ATX heading, levels 1-6 (the search index weights them above body text), with its
# run of '#': a run is followed by a blank, so it is the level. One pass finds both the
# level-1 headings (the title's source) and all of them.
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
# Obsidian-style inline tags: '#' not preceded by a word char, '/', '#', '&' or ':' (so URL
# fragments, HTML entities and headings are not tags) nor a link's "](" (an in-page
# anchor), then letters, digits, '_', '-', '/'.
# (The '#' comes first and the look-behinds then include it, so the engine scans for '#'
# instead of evaluating look-behinds at every position: 5x faster on prose.)
_TAG = re.compile(r"#(?<![\w/#&:]#)(?<!\]\(#)([^\W\d][\w/-]*|\d+[^\W\d][\w/-]*)")


@dataclass
class NoteMeta:
    title: str
    frontmatter: dict[str, Any]
    tags: list[str]
    links: list[dict[str, str]]
    body_start_line: int = 1  # 1-based line where the body (after frontmatter) starts
    headings: list[str] = field(default_factory=list)  # level-1 headings (the title's source)
    all_headings: list[str] = field(default_factory=list)  # every ATX heading, in order
    body: str = ""  # the text after the frontmatter
    refs: list[Occurrence] = field(default_factory=list)  # every link, with its span


def frontmatter_close(lines: list[str]) -> int | None:
    """The index of the line that closes the frontmatter opened by ``lines[0]`` (the note's
    text split at ``\n``), or None when the note has no frontmatter."""
    if not lines or lines[0].rstrip("\r") != FRONTMATTER_OPEN:
        return None
    for i in range(1, min(len(lines), MAX_FRONTMATTER_LINES + 1)):
        if lines[i].rstrip("\r") in FRONTMATTER_CLOSE:
            return i
    return None


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, int]:
    """Return (frontmatter, body, body_start_line). No frontmatter: ({}, text, 1)."""
    block, body, body_start = _split(text)
    return parse_block(block), body, body_start


def body_of(text: str) -> tuple[str, int]:
    """(body, body_start_line) as :func:`split_frontmatter` gives them, without parsing the
    frontmatter (search's excerpts need only the body)."""
    _block, body, body_start = _split(text)
    return body, body_start


def _split(text: str) -> tuple[list[str], str, int]:
    """(frontmatter lines, body, body start line): what :func:`frontmatter_close` finds in
    ``text.split("\n")``, found line by line so that the body is one slice of the text, not
    split into lines and joined again (a third of the time of a note's analysis)."""
    if not text.startswith(FRONTMATTER_OPEN):
        return [], text, 1
    end = text.find("\n")
    if end == -1 or text[:end].rstrip("\r") != FRONTMATTER_OPEN:
        return [], text, 1
    block: list[str] = []
    for number in range(1, MAX_FRONTMATTER_LINES + 1):
        start = end + 1
        end = text.find("\n", start)
        line = (text[start:] if end == -1 else text[start:end]).rstrip("\r")
        if line in FRONTMATTER_CLOSE:
            return block, "" if end == -1 else text[end + 1 :], number + 2
        if end == -1:
            break
        block.append(line)
    return [], text, 1


def parse_block(lines: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    current_list: list[Any] | None = None
    for raw in lines:
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        stripped = raw.strip()
        if stripped.startswith("- ") or stripped == "-":
            if current_list is not None:
                current_list.append(_scalar(stripped[1:].strip()))
            continue
        if raw[:1].isspace():
            continue  # nested structure we do not model
        key, sep, value = raw.partition(":")
        key = key.strip()
        if not sep or not key:
            continue
        value = value.strip()
        if not value:
            current_list = []
            out[key] = current_list
            continue
        current_list = None
        out[key] = _value(value)
    # A key with no items below it ("tags:") is empty, not a list of nothing useful.
    return {k: (None if v == [] else v) for k, v in out.items()}


def _value(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        if not inner:
            return []
        return [_scalar(part.strip()) for part in _split_flow(inner)]
    return _scalar(text)


def _split_flow(inner: str) -> list[str]:
    parts, buf, quote = [], [], ""
    for ch in inner:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            buf.append(ch)
        elif ch == ",":
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    parts.append("".join(buf))
    return [p for p in parts if p.strip()]


# The escapes of a YAML double-quoted scalar that note apps write; others stay as written.
_DOUBLE_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "/": "/"}
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)")


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] == "u" and len(code) == 5:
        point = int(code[1:], 16)
        # A lone surrogate is not text (it could not be encoded as UTF-8 again).
        return match.group(0) if 0xD800 <= point <= 0xDFFF else chr(point)
    return _DOUBLE_ESCAPES.get(code, match.group(0))


def _quoted(text: str) -> bool:
    return len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'"


# Compiled once: a frontmatter value is matched against both (re's own cache costs a lookup
# per call, on every value of every note of a build).
_INTEGER = re.compile(r"[-+]?\d{1,18}")
_DECIMAL = re.compile(r"[-+]?\d+\.\d+")


def _scalar(text: str) -> Any:
    if " #" in text and not _quoted(text):
        text = text.split(" #", 1)[0].rstrip()  # a comment ('"a" # why' is the string a)
    if _quoted(text):
        inner = text[1:-1]
        if text[0] == "'":
            return inner.replace("''", "'")  # YAML's only single-quoted escape
        return _ESCAPE.sub(_unescape, inner) if "\\" in inner else inner
    low = text.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if low in ("null", "~", ""):
        return None
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        number = float(text)
        # A decimal too large for a double would become inf, which JSON cannot carry.
        return number if math.isfinite(number) else text
    return text


def _frontmatter_tags(value: Any) -> list[str]:
    if isinstance(value, str):
        items: list[Any] = re.split(r"[,\s]+", value)
    elif isinstance(value, list):
        items = value
    else:
        return []
    tags = []
    for item in items:
        if isinstance(item, str | int) and not isinstance(item, bool):
            tag = str(item).strip().lstrip("#")
            if tag:
                tags.append(tag)
    return tags


def atx_headings(prose: str) -> list[tuple[str, str]]:
    """(run of '#', text) of every ATX heading of ``prose``: the matches of ``_HEADING``,
    tried only at the start of each line that holds a '#'. The same as its ``finditer``
    (a match lies within one line and begins at its start), and 5-10x faster on notes:
    a pattern anchored at line starts is tried at every position of the text."""
    out = []
    at = prose.find("#")
    while at != -1:
        found = _HEADING.match(prose, prose.rfind("\n", 0, at) + 1)
        if found is not None:
            out.append((found.group(1), found.group(2).strip()))
        end = prose.find("\n", at)
        if end == -1:
            break
        at = prose.find("#", end)
    return out


def analyse(text: str, stem: str) -> NoteMeta:
    """Title, frontmatter, tags and links of a note's text. ``stem`` is the file-name stem."""
    frontmatter, body, body_start = split_frontmatter(text)
    # The body without its code (fsnotes.notes.text.code): headings and tags are looked for
    # in ``prose`` (a code span read as one space), links in ``masked`` (offsets kept).
    ranges = code.code_ranges(body)
    masked = code.mask(body, ranges)
    prose = code.prose(body, ranges)

    found = atx_headings(prose)
    headings = [text for run, text in found if run == "#"]
    all_headings = [text for _run, text in found]

    title_value = frontmatter.get("title")
    if isinstance(title_value, str) and title_value.strip():
        title = title_value.strip()
    elif headings:
        title = headings[0]
    else:
        title = stem

    tags: list[str] = []
    seen: set[str] = set()
    inline = [m.group(1).rstrip("/-") for m in _TAG.finditer(prose)]
    for tag in _frontmatter_tags(frontmatter.get("tags")) + inline:
        key = tag.casefold()
        if key not in seen:
            seen.add(key)
            tags.append(tag)

    # Every link with its place (fsnotes.notes.text.links: one parser for the index, notes_links
    # and the rewrites of a move); ``links`` keeps what notes_read has always listed: the
    # wikilinks (embeds included) and the Markdown links that are not images.
    refs = occurrences(body, len(text) - len(body), masked)
    links: list[dict[str, str]] = []
    seen_links: set[tuple[str, str]] = set()
    for ref in refs:
        if not (ref.kind == "markdown" and ref.embed):
            _add_link(links, seen_links, ref.kind, ref.target)
    return NoteMeta(
        title=title,
        frontmatter=frontmatter,
        tags=tags,
        links=links,
        body_start_line=body_start,
        headings=headings,
        all_headings=all_headings,
        body=body,
        refs=refs,
    )


def _add_link(
    out: list[dict[str, str]], seen: set[tuple[str, str]], kind: str, target: str
) -> None:
    if target and (kind, target) not in seen:
        seen.add((kind, target))
        out.append({"type": kind, "target": target})


def has_tag(meta_tags: list[str], wanted: str) -> bool:
    """Case-insensitive tag match; '#x' and 'x' are the same; 'a' matches nested 'a/b'."""
    want = wanted.strip().lstrip("#").casefold()
    return any(t.casefold() == want or t.casefold().startswith(want + "/") for t in meta_tags)
