"""Notes related to one note, from the catalog: its links, the notes that link to it, the notes
that share its tags, and a search for its title (the related_notes prompt).

What a link is and which note it names are :mod:`fsnotes.notes.text.links`'s rules, asked of the
index through :mod:`fsnotes.notes.index.linkgraph` exactly as ``notes_links`` asks: the notes it
links to are the ones ``notes_links`` resolves its links to, the notes that link to it are
its backlinks there, and its broken links are the ones ``notes_links`` reports ``broken``
or ``outside`` (an attachment, ``other`` there, is not a note link). The note itself is
never named as related to itself.

Every note returned was checked against its file by the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fsnotes.notes.index import linkgraph
from fsnotes.notes.index.catalog import Catalog
from fsnotes.notes.index.schema import Row
from fsnotes.notes.store import NoteStore, display
from fsnotes.notes.text.markdown import NoteMeta
from fsnotes.notes.text.query import QueryError
from fsnotes.notes.text.query import parse as parse_query
from sandbox.uri import Components

# Notes named as related in one prompt: enough to choose from, few enough to read. (The
# links followed, and the backlinks found, are linkgraph's MAX_OUTGOING and MAX_BACKLINKS.)
MAX_RELATED = 25
# Tags of the note followed, and notes taken per tag (in path order).
MAX_TAGS_FOLLOWED = 5
PER_TAG = 10
# Search hits for the note's title.
SEARCH_HITS = 10


@dataclass
class RelatedNote:
    row: Row
    reasons: list[str] = field(default_factory=list)


@dataclass
class Related:
    candidates: list[RelatedNote]
    broken: list[str]  # the note's links that lead to no note, as written


def _link_text(kind: str, target: str) -> str:
    return f"[[{target}]]" if kind == "wikilink" else f"({target})"


def related(catalog: Catalog, store: NoteStore, parts: Components, meta: NoteMeta) -> Related:
    """Candidates related to the note at ``parts`` (whose analysis is ``meta``), best
    reasons first: links from it, links to it, shared tags, its title's words."""
    found: dict[Components, RelatedNote] = {}
    broken: list[str] = []

    def add(row: Row, reason: str) -> None:
        if row.parts == parts:
            return
        candidate = found.setdefault(row.parts, RelatedNote(row))
        if reason not in candidate.reasons:
            candidate.reasons.append(reason)

    catalog.refresh(parts)  # this note as read now, whatever the index had (as notes_links)
    outgoing, _total = linkgraph.outgoing(catalog, parts, meta.refs, store.extensions)
    for link in outgoing:
        if link.row is not None:
            add(link.row, "it links there")
        elif not link.target.attachment:  # notes_links' 'broken' and 'outside'
            text = _link_text(link.occurrence.kind, link.occurrence.target)
            if text not in broken:  # one entry per target, whatever its headings
                broken.append(text)

    backlinks, _total = linkgraph.backlinks(catalog, parts, store.extensions)
    for backlink in backlinks:
        add(backlink.row, "links here")

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


def describe(candidate: RelatedNote) -> str:
    return f"{candidate.row.title} ({display(candidate.row.parts)}): {'; '.join(candidate.reasons)}"
