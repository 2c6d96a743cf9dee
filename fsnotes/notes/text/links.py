"""Links between notes: how they are written, what they point to, and how to rewrite them.

Pure functions over text and note paths; no file or index access. The index stores what
:func:`classify` says about every link (:mod:`fsnotes.notes.index.schema`), ``notes_links`` and
backlinks resolve with :func:`resolve` (:mod:`fsnotes.notes.index.linkgraph`), and a move rewrites
with :func:`render` (:mod:`fsnotes.notes.tools.relink`), so the three can never disagree about
what a link means.

What is a link (in the body, outside code: fenced and indented code blocks and code spans,
as :mod:`fsnotes.notes.text.code` finds them by CommonMark's rules; never in the
frontmatter):

* a wikilink ``[[target]]``, ``[[target#heading]]``, ``[[target|alias]]``, and the embed
  ``![[target]]``;
* a Markdown link ``[text](path)`` or image ``![alt](path)`` (an embed) whose destination
  has no scheme (``https:``, ``mailto:``) and starts with neither ``#`` nor ``/``; ``<...>``
  destinations may hold spaces; ``%XX`` escapes are decoded once (UTF-8).

What it points to (the rules are stated in the ``notes_links`` tool description too):

* **Wikilinks are names**, compared case-insensitively, as Obsidian does. ``[[Name]]``
  matches every note whose file name without its extension is ``Name``; ``[[a/Name]]``
  every note whose path ends with the folder ``a`` and that name; a note extension
  (``[[Name.md]]``) must then match too. Of several matches the one with the shortest path
  (fewest folders) wins, then the first in path order: so the exact path from the
  workspace root always wins when it exists. ``[[./x]]`` and ``[[../x]]`` are paths
  relative to the linking note (the next rule, without ``%`` decoding).
* **Markdown links are paths** relative to the linking note's folder, compared exactly
  (case-sensitive), as any Markdown renderer follows them; without a note extension
  (``[t](../Name)``) they match a note with that name and any note extension, in that
  folder. A path that climbs out of the workspace is ``outside``.
* A target whose extension is a common attachment type (:data:`ATTACHMENT_EXTENSIONS`: an
  image, a PDF, ...) is not a note link: it is reported as ``other`` and not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple
from urllib.parse import unquote

from fsnotes.notes.text import code
from sandbox.uri import Components

# File types that a link names as an attachment rather than a note: Obsidian's own list of
# embeddable formats, plus the office, archive and data files notes commonly link to. Any
# other suffix (``[[v1.2]]``, ``[[Meeting 2026.01]]``) is part of a note's name, as in
# Obsidian, which appends ``.md`` to such a link.
ATTACHMENT_EXTENSIONS = frozenset(
    {
        *("png", "jpg", "jpeg", "gif", "bmp", "svg", "webp", "avif", "heic", "tif", "tiff"),
        *("ico", "mp3", "webm", "wav", "m4a", "ogg", "3gp", "flac", "mp4", "ogv", "mov"),
        *("mkv", "pdf", "canvas", "base", "csv", "json", "html", "htm", "xml", "docx"),
        *("xlsx", "pptx", "odt", "ods", "zip"),
    }
)

Style = Literal["name", "path"]
Problem = Literal["outside", "invalid"]

# [[target#heading|alias]]; a '!' just before it makes it an embed. The target holds no
# '[', ']', '|', '#' or newline (as in Obsidian). Both patterns start with a literal '[' so
# that the regex engine scans for it (an optional '!' group first made parsing 3x slower).
_WIKILINK = re.compile(r"\[\[([^\[\]\n|#]+)(?:#([^\[\]\n|]*))?(?:\|([^\[\]\n]*))?\]\]")
# [text](destination "title"); a '!' just before it makes it an image (an embed). The
# destination is <anything but angle brackets or newlines> or a run without spaces,
# parentheses or angle brackets; an optional title in "", '' or () follows.
_MDLINK = re.compile(
    r"\[[^\[\]\n]*\]\(\s*(?:<([^<>\n]*)>|([^\s()<>]+))"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# Characters a wikilink target cannot hold: a note whose path has one cannot be named by a
# wikilink (a rewrite reports it instead).
_WIKILINK_FORBIDDEN = frozenset("[]|#\n")
# A percent escape of a byte above ASCII: a destination written with these gets non-ASCII
# characters escaped when rewritten.
_HIGH_ESCAPE = re.compile(r"%[89A-Fa-f][0-9A-Fa-f]")


class Occurrence(NamedTuple):
    """One link as written: where it is, and the part a rewrite replaces. (A named tuple:
    every note parsed makes a few, and a frozen dataclass takes three times as long to build.)"""

    kind: Literal["wikilink", "markdown"]
    embed: bool
    target: str  # wikilink: the target, stripped; markdown: the raw path (still %-encoded)
    heading: str | None  # after '#' (wikilink heading, markdown fragment)
    alias: str | None  # wikilink alias (after '|')
    start: int  # the whole link: text[start:end]
    end: int
    target_start: int  # the target alone: text[target_start:target_end] == target
    target_end: int
    angle: bool = False  # a Markdown destination written in <...>


def occurrences(body: str, offset: int = 0, masked: str | None = None) -> list[Occurrence]:
    """Every link in ``body`` (the text after the frontmatter), in text order. Spans are
    offsets into the whole text when ``offset`` is where ``body`` starts in it. ``masked``:
    ``code.mask(body)``, when the caller has it already."""
    if "[" not in body:
        return []
    if masked is None:
        masked = code.mask(body)
    found: list[Occurrence] = []
    if "[[" in masked:
        for m in _WIKILINK.finditer(masked):
            raw = m.group(1)
            target = raw.strip()
            if not target:
                continue
            lead = len(raw) - len(raw.lstrip())
            begin = m.start(1) + lead
            embed = m.start() > 0 and masked[m.start() - 1] == "!"
            found.append(
                Occurrence(
                    kind="wikilink",
                    embed=embed,
                    target=target,
                    heading=m.group(2),
                    alias=m.group(3),
                    start=m.start() - embed + offset,
                    end=m.end() + offset,
                    target_start=begin + offset,
                    target_end=begin + len(target) + offset,
                )
            )
    if "](" in masked:
        for m in _MDLINK.finditer(masked):
            angle = m.group(1) is not None
            group = 1 if angle else 2
            href = m.group(group)
            if not href or _SCHEME.match(href) or href.startswith(("#", "/")):
                continue  # external, in-page or absolute: not a relative note link
            path, sep, fragment = href.partition("#")
            if not path.strip():
                continue
            begin = m.start(group)
            embed = m.start() > 0 and masked[m.start() - 1] == "!"
            found.append(
                Occurrence(
                    kind="markdown",
                    embed=embed,
                    target=path,
                    heading=fragment if sep else None,
                    alias=None,
                    start=m.start() - embed + offset,
                    end=m.end() + offset,
                    target_start=begin + offset,
                    target_end=begin + len(path) + offset,
                    angle=angle,
                )
            )
        found.sort(key=lambda o: o.start)
    return found


# --- what a link points to -------------------------------------------------------------------


def stem_of(name: str) -> str:
    """A file name without its extension (as fsnotes.notes.store.stem_of)."""
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name


def _has_note_extension(name: str, extensions: Sequence[str]) -> bool:
    low = name.casefold()
    return any(low.endswith(ext) and len(low) > len(ext) for ext in extensions)


def _is_attachment(name: str) -> bool:
    dot = name.rfind(".")
    return dot > 0 and name[dot + 1 :].casefold() in ATTACHMENT_EXTENSIONS


@dataclass(frozen=True, slots=True)
class LinkTarget:
    """What a link names, independent of which notes exist."""

    style: Style
    # name: the components as written; path: resolved from the workspace root, with the
    # last one as written (with or without an extension).
    parts: Components
    explicit: bool = False  # the last component carries a note extension
    attachment: bool = False  # the last component names an attachment type
    problem: Problem | None = None  # outside the workspace, or not decodable

    @property
    def leaf(self) -> str | None:
        """The case-folded file name without extension a note must have to match (the
        index looks candidates up by it); None when no note can ever match."""
        if self.problem is not None or self.attachment or not self.parts:
            return None
        last = self.parts[-1]
        return (stem_of(last) if self.explicit else last).casefold()

    @property
    def want(self) -> str:
        """The components joined with '/' (what the index stores; see :func:`from_row`)."""
        return "/".join(self.parts)

    @property
    def mode(self) -> str:
        """What the index stores: the style ('name' or 'path'; whether it names an
        attachment follows from the last component), or the problem ('outside',
        'invalid')."""
        return self.problem if self.problem is not None else self.style


def _finish(style: Style, parts: Components, extensions: Sequence[str]) -> LinkTarget:
    if not parts:
        return LinkTarget(style, (), problem="invalid")
    last = parts[-1]
    if _has_note_extension(last, extensions):
        return LinkTarget(style, parts, explicit=True)
    return LinkTarget(style, parts, attachment=_is_attachment(last))


def _relative(base: Components, text: str) -> Components | None:
    """``text`` ('/'-separated, '.' and '..' allowed) from the folder ``base``; None when it
    climbs above the workspace."""
    stack = list(base)
    for segment in text.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not stack:
                return None
            stack.pop()
        else:
            stack.append(segment)
    return tuple(stack)


def classify(occ: Occurrence, linker: Components, extensions: Sequence[str]) -> LinkTarget:
    """What ``occ``, written in the note at ``linker``, names (see the module docstring)."""
    if occ.kind == "markdown":
        try:
            text = unquote(occ.target, errors="strict")
        except UnicodeDecodeError:
            return LinkTarget("path", (), problem="invalid")
        return _path_target(linker, text, extensions)
    text = occ.target
    if text in (".", "..") or text.startswith(("./", "../")):
        return _path_target(linker, text, extensions)
    return _finish("name", tuple(p for p in text.split("/") if p), extensions)


def _path_target(linker: Components, text: str, extensions: Sequence[str]) -> LinkTarget:
    parts = _relative(linker[:-1], text)
    if parts is None:
        return LinkTarget("path", (), problem="outside")
    return _finish("path", parts, extensions)


def from_row(mode: str, want: str, extensions: Sequence[str]) -> LinkTarget:
    """The target the index stored as (``mode``, ``want``)."""
    if mode == "outside":
        return LinkTarget("path", (), problem="outside")
    if mode == "invalid":
        return LinkTarget("path", (), problem="invalid")
    parts = tuple(want.split("/")) if want else ()
    style: Style = "name" if mode == "name" else "path"
    return _finish(style, parts, extensions)


def matches(target: LinkTarget, note: Components) -> bool:
    """Whether the note at ``note`` is one that ``target`` names (before the tie-break)."""
    if target.leaf is None:
        return False
    parts = target.parts
    if target.style == "path":
        if note[:-1] != parts[:-1]:
            return False
        return note[-1] == parts[-1] if target.explicit else stem_of(note[-1]) == parts[-1]
    if len(note) < len(parts):
        return False
    last = note[-1] if target.explicit else stem_of(note[-1])
    if last.casefold() != parts[-1].casefold():
        return False
    return all(
        a.casefold() == b.casefold()
        for a, b in zip(note[-len(parts) : -1], parts[:-1], strict=True)
    )


def resolve(target: LinkTarget, notes: Iterable[Components]) -> Components | None:
    """The note ``target`` points to among ``notes`` (any superset of the notes whose
    case-folded stem is ``target.leaf`` will do), or None: the shortest matching path,
    then the first in path order."""
    best: Components | None = None
    for note in notes:
        if matches(target, note) and (best is None or (len(note), note) < (len(best), best)):
            best = note
    return best


# --- writing a link that points somewhere else ---------------------------------------------


def _encode_segment(segment: str, *, angle: bool, spaces: bool, high: bool) -> str:
    out = []
    for ch in segment:
        if ch == "%" or ch in "<>#" or (ch in "()" and not angle):
            out.append(f"%{ord(ch):02X}")
        elif ch == " " and spaces:
            out.append("%20")
        elif high and ord(ch) > 0x7F:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
        else:
            out.append(ch)
    return "".join(out)


def relative_text(base: Components, parts: Components) -> str:
    """The '/'-path from the folder ``base`` to ``parts`` ('..' up to their common folder)."""
    common = 0
    while common < min(len(base), len(parts) - 1) and base[common] == parts[common]:
        common += 1
    return "/".join([".."] * (len(base) - common) + list(parts[common:]))


def render_path(occ: Occurrence, linker: Components, parts: Components) -> str:
    """The target text that makes ``occ`` (a path-style link, now in the note at
    ``linker``) name ``parts``, in the link's own form: a leading './' kept; for Markdown,
    spaces, non-ASCII characters and angle brackets written as the original wrote them."""
    text = relative_text(linker[:-1], parts)
    # A wikilink is relative only with a leading './' or '../' (without, it is a name).
    relative_wikilink = occ.kind == "wikilink"
    if (occ.target.startswith("./") or relative_wikilink) and not text.startswith("../"):
        text = "./" + text
    if occ.kind == "wikilink":
        return text
    spaces = not occ.angle or "%20" in occ.target
    high = bool(_HIGH_ESCAPE.search(occ.target))
    return "/".join(
        segment
        if segment in (".", "..")
        else _encode_segment(segment, angle=occ.angle, spaces=spaces, high=high)
        for segment in text.split("/")
    )


def render_name(
    occ: Occurrence,
    note: Components,
    candidates: Iterable[Components],
    extensions: Sequence[str],
) -> str | None:
    """The shortest wikilink target naming ``note`` among ``candidates`` (the notes that
    exist, a superset of those with ``note``'s stem), with at least as many folders as
    ``occ`` wrote and its extension if it wrote one (added where needed to tell notes
    apart); None when no wikilink can name it (a '#', '|' or bracket in its path, or two
    notes whose paths differ only in case)."""
    if any(ch in _WIKILINK_FORBIDDEN for part in note for ch in part):
        return None
    pool = list(candidates)
    written = tuple(p for p in occ.target.split("/") if p)
    had_extension = bool(written) and _has_note_extension(written[-1], extensions)
    forms = (True,) if had_extension else (False, True)
    for length in range(min(max(len(written), 1), len(note)), len(note) + 1):
        for explicit in forms:
            parts = note[-length:]
            last = parts[-1] if explicit else stem_of(parts[-1])
            text = "/".join((*parts[:-1], last))
            if text.startswith(("./", "../")) or text in (".", ".."):
                continue
            probe = Occurrence("wikilink", occ.embed, text, None, None, 0, 0, 0, 0)
            if resolve(classify(probe, note, extensions), pool) == note:
                return text
    return None


__all__ = [
    "ATTACHMENT_EXTENSIONS",
    "LinkTarget",
    "Occurrence",
    "classify",
    "from_row",
    "matches",
    "occurrences",
    "relative_text",
    "render_name",
    "render_path",
    "resolve",
]
