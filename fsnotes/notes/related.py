"""Notes related to one note, from the catalog: its links, the notes that link to it, the notes
that share its tags, and a search for its title (the related_notes prompt).

How a link is resolved (a small rule, stated so that a reader can predict it):

- A Markdown link ``[x](../plans/shed.md)`` is a path relative to the linking note's folder
  (percent-escapes decoded); one that leaves the workspace, or that names no note, is broken.
  A link to anything that is not a note (an image, a PDF, a web page) is not a note link.
- A wikilink ``[[Shed]]`` names a note by its file name without extension (``[[shed.md]]``
  with it), case ignored; ``[[plans/shed]]`` by its path from the workspace's top. When
  several notes have that name, the one in the linking note's folder wins, then the one with
  the shortest path, then the first in path order.

Every note returned was checked against its file by the catalog.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from .catalog import Catalog
from .markdown import NoteMeta
from .query import QueryError
from .query import parse as parse_query
from .schema import Row
from .store import NoteStore, display, stem_of

Components = tuple[str, ...]

# Notes named as related in one prompt: enough to choose from, few enough to read.
MAX_RELATED = 25
# Links that mention the note's name, looked at to find the ones that lead to it.
MAX_BACKLINK_CANDIDATES = 500
# Notes with a given file name considered when resolving one wikilink.
MAX_SAME_NAME = 50
# Tags of the note followed, and notes taken per tag (in path order).
MAX_TAGS_FOLLOWED = 5
PER_TAG = 10
# Search hits for the note's title.
SEARCH_HITS = 10


@dataclass
class Candidate:
    row: Row
    reasons: list[str] = field(default_factory=list)


@dataclass
class Related:
    candidates: list[Candidate]
    broken: list[str]  # the note's links that lead to no note, as written


def _link_text(kind: str, target: str) -> str:
    return f"[[{target}]]" if kind == "wikilink" else f"({target})"


def resolve(
    catalog: Catalog, store: NoteStore, kind: str, target: str, source: Components
) -> tuple[bool, Row | None]:
    """Whether a link of the note at ``source`` is a link to a note, and the note it leads
    to (None: a note link that leads nowhere, a broken link)."""
    if kind == "markdown":
        path = unquote(target)
        if not store.is_note_name(posixpath.basename(path)):
            return False, None  # an image, a PDF, a folder: not a note link
        joined = posixpath.normpath(posixpath.join(*source[:-1], path))
        if joined.startswith(("../", "/")) or joined in ("..", "."):
            return True, None  # leaves the workspace
        return True, catalog.note_at(tuple(joined.split("/")))
    name = target.strip().strip("/")
    if not name:
        return True, None
    names = [name] if store.is_note_name(name) else [name + ext for ext in store.extensions]
    rows = catalog.ending_with(names, MAX_SAME_NAME)
    if "/" in name:  # a path from the workspace's top, not any folder's
        exact = {n.casefold() for n in names}
        rows = [r for r in rows if display(r.parts).casefold() in exact]
    if not rows:
        return True, None
    folder = source[:-1]
    return True, min(rows, key=lambda r: (r.parts[:-1] != folder, len(r.parts), r.parts))


def related(catalog: Catalog, store: NoteStore, parts: Components, meta: NoteMeta) -> Related:
    """Candidates related to the note at ``parts`` (whose analysis is ``meta``), best
    reasons first: links from it, links to it, shared tags, its title's words."""
    found: dict[Components, Candidate] = {}
    broken: list[str] = []

    def add(row: Row, reason: str) -> None:
        if row.parts == parts:
            return
        candidate = found.setdefault(row.parts, Candidate(row))
        if reason not in candidate.reasons:
            candidate.reasons.append(reason)

    for link in meta.links:
        kind, target = link["type"], link["target"]
        is_note_link, leads = resolve(catalog, store, kind, target, parts)
        if leads is not None:
            add(leads, "it links there")
        elif is_note_link:
            broken.append(_link_text(kind, target))

    for row, kind, target in catalog.links_mentioning(stem_of(parts[-1]), MAX_BACKLINK_CANDIDATES):
        _note_link, leads = resolve(catalog, store, kind, target, row.parts)
        if leads is not None and leads.parts == parts:
            add(row, "links here")

    for tag in meta.tags[:MAX_TAGS_FOLLOWED]:
        for row in catalog.page((), None, PER_TAG + 1, tag).rows:
            add(row, f"shares #{tag}")

    try:
        terms = parse_query(meta.title)
    except QueryError:
        terms = []
    if terms:
        for hit in catalog.search(terms, (), None, SEARCH_HITS + 1).hits:
            add(hit.row, "matches its title")

    ordered = sorted(found.values(), key=lambda c: _rank(c.reasons))
    return Related(candidates=ordered[:MAX_RELATED], broken=broken)


def _rank(reasons: Sequence[str]) -> tuple[int, int]:
    order = ("it links there", "links here")
    best = min((order.index(r) for r in reasons if r in order), default=len(order))
    return best, -len(reasons)


def describe(candidate: Candidate) -> str:
    return f"{candidate.row.title} ({display(candidate.row.parts)}): {'; '.join(candidate.reasons)}"
