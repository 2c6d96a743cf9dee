"""Links and tags as a workspace's index knows them, checked against the files.

``notes_links`` (a note's outgoing links resolved, and its backlinks), the ``related_notes``
prompt (the same two, :mod:`fsnotes.notes.index.related`), ``notes_tags``, and what a move needs
to know before it rewrites links (:mod:`fsnotes.notes.tools.relink`) all ask here. What a link
means is :mod:`fsnotes.notes.text.links`; this module only finds, in the index, the notes a link
could name and the links that could name a note:

* a link is stored with the ``leaf`` a note's case-folded file name (without extension)
  must equal for the link to name it, and every note with its case-folded stem, so the
  candidates of a link are one index lookup and the links that may name a note are
  another, whatever the size of the vault;
* every note a result names, and every candidate a resolution depends on, is checked
  against its file first (a stat through the Root, as search results are): a note that
  changed is indexed again and the question asked again.

Freshness: a note changed by another program is seen by the index within its freshness
bound (the watcher's fraction of a second, else the rescan interval); until then a link
it gained or lost is not known here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fsnotes.notes.index.catalog import MAX_VERIFY_ROUNDS, Catalog
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import ROW_COLUMNS, Row, row_of
from fsnotes.notes.text import links as rules
from sandbox.uri import Components

# Outgoing links listed per note (in text order; the total is always given): a note with
# more is an index or a generated list, and a model reads a few hundred at most.
MAX_OUTGOING = 500
# Backlinks listed per note (in path order; the total is always given), for the same reason.
MAX_BACKLINKS = 500
# Values bound in one IN (...) list: far below SQLite's limit on bound parameters (32,766
# since 3.32; 999 before), so a note with thousands of distinct links is looked up in chunks.
IN_CHUNK = 500
DEFAULT_TAGS_LIMIT = 100
# Tags per page of notes_tags: a page of names and counts stays a few tens of kilobytes.
MAX_TAGS_LIMIT = 1_000


def _chunks(values: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), IN_CHUNK):
        yield values[start : start + IN_CHUNK]


def _named(index: NoteIndex, leaves: Sequence[str]) -> list[Row]:
    """Every note whose case-folded stem is one of ``leaves``."""
    rows: list[Row] = []
    for chunk in _chunks(sorted(set(leaves))):
        marks = ", ".join("?" * len(chunk))
        rows += [
            row_of(r)
            for r in index.query(
                f"SELECT {ROW_COLUMNS} FROM notes WHERE stem_fold IN ({marks})", list(chunk)
            )
        ]
    return rows


@dataclass(frozen=True, slots=True)
class IndexedLink:
    """One distinct link of one note, as the index stored it."""

    linker: Row
    kind: str
    embed: bool
    target: str
    mode: str
    want: str


def _linking(index: NoteIndex, leaves: Sequence[str]) -> list[IndexedLink]:
    """Every stored link whose leaf is one of ``leaves``, with the note that holds it."""
    cols = ", ".join(f"n.{c.strip()}" for c in ROW_COLUMNS.split(","))
    out: list[IndexedLink] = []
    for chunk in _chunks(sorted(set(leaves))):
        marks = ", ".join("?" * len(chunk))
        for r in index.query(
            f"SELECT {cols}, l.kind, l.embed, l.target, l.mode, l.want FROM links l "
            f"JOIN notes n ON n.id = l.note WHERE l.leaf IN ({marks})",
            list(chunk),
        ):
            out.append(IndexedLink(row_of(r[:8]), r[8], bool(r[9]), r[10], r[11], r[12]))
    return out


def candidate_rows(catalog: Catalog, leaves: Sequence[str]) -> list[Row]:
    """The notes named by ``leaves``, each checked against its file (the ones that changed
    indexed again first)."""
    for _ in range(MAX_VERIFY_ROUNDS):
        rows = catalog.read(lambda ix: _named(ix, leaves))
        if not catalog.check(rows):
            break
    else:
        rows = catalog.read(lambda ix: _named(ix, leaves))
    return rows


def candidates(catalog: Catalog, leaves: Sequence[str]) -> list[Components]:
    """The paths of :func:`candidate_rows`."""
    return [row.parts for row in candidate_rows(catalog, leaves)]


def linking(catalog: Catalog, leaves: Sequence[str]) -> list[IndexedLink]:
    """The stored links that may name a note with one of ``leaves`` (not checked: callers
    check the notes they use)."""
    return catalog.read(lambda ix: _linking(ix, leaves))


# --- notes_links ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outgoing:
    occurrence: rules.Occurrence
    target: rules.LinkTarget
    count: int
    resolved: Components | None
    row: Row | None  # the resolved note as the index has it (checked), for its title


@dataclass(frozen=True, slots=True)
class LinkingNote:
    row: Row
    links: int  # distinct links in that note that name this one


def outgoing(
    catalog: Catalog, note: Components, refs: Sequence[rules.Occurrence], extensions: Sequence[str]
) -> tuple[list[Outgoing], int]:
    """The links of the note at ``note`` (``refs``, parsed from its text), one entry per
    distinct (form, target, heading) in text order with how often it occurs, each resolved
    among the notes as the index knows them (checked); at most :data:`MAX_OUTGOING`, and
    how many distinct ones there are."""
    grouped: dict[tuple[str, bool, str, str | None], list[rules.Occurrence]] = {}
    for ref in refs:
        grouped.setdefault((ref.kind, ref.embed, ref.target, ref.heading), []).append(ref)
    shown = list(grouped.values())[:MAX_OUTGOING]
    targets = [rules.classify(group[0], note, extensions) for group in shown]
    rows = {
        row.parts: row
        for row in candidate_rows(catalog, [t.leaf for t in targets if t.leaf is not None])
    }
    out = []
    for group, target in zip(shown, targets, strict=True):
        resolved = rules.resolve(target, rows)
        row = rows[resolved] if resolved is not None else None
        out.append(Outgoing(group[0], target, len(group), resolved, row))
    return out, len(grouped)


def backlinks(
    catalog: Catalog, note: Components, extensions: Sequence[str]
) -> tuple[list[LinkingNote], int]:
    """The notes with a link that names ``note`` (itself included, if it links to itself),
    in path order: at most :data:`MAX_BACKLINKS`, each checked against its file, and how
    many there are as indexed."""
    leaf = rules.stem_of(note[-1]).casefold()
    found: list[LinkingNote] = []
    total = 0
    for attempt in range(MAX_VERIFY_ROUNDS):
        pool = candidates(catalog, [leaf])
        if note not in pool:
            pool.append(note)  # the caller read it: it is a note, indexed or not yet
        counts: dict[Components, tuple[Row, int]] = {}
        for link in linking(catalog, [leaf]):
            target = rules.from_row(link.mode, link.want, extensions)
            if rules.resolve(target, pool) == note:
                row, n = counts.get(link.linker.parts, (link.linker, 0))
                counts[link.linker.parts] = (row, n + 1)
        total = len(counts)
        found = [LinkingNote(row, n) for _parts, (row, n) in sorted(counts.items())][:MAX_BACKLINKS]
        stale = catalog.check([b.row for b in found])
        if not stale:
            break
        if attempt == MAX_VERIFY_ROUNDS - 1:
            gone = {row.parts for row in stale}
            found = [b for b in found if b.row.parts not in gone]
    return found, total


# --- notes_tags ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TagCount:
    tag: str
    notes: int  # notes that carry this tag itself
    with_nested: int  # notes that carry it or a tag nested below it (what a tag filter finds)


def _tag_page(
    index: NoteIndex, prefix: str, after: str | None, limit: int
) -> tuple[list[TagCount], bool, int]:
    where, params = [], []
    if prefix:
        where.append("tag >= ? AND tag < ?")
        params += [prefix, prefix + "\U0010ffff"]
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    total = int(index.query(f"SELECT count(DISTINCT tag) FROM tags{clause}", params)[0][0])
    if after is not None:
        where.append("tag > ?")
        params.append(after)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = index.query(
        f"SELECT tag, count(*) FROM tags{clause} GROUP BY tag ORDER BY tag LIMIT ?",
        [*params, limit + 1],
    )
    page: list[TagCount] = []
    for tag, count in rows[:limit]:
        nested = index.query(
            "SELECT 1 FROM tags WHERE tag >= ? AND tag < ? LIMIT 1", (tag + "/", tag + "0")
        )
        with_nested = int(count)
        if nested:
            with_nested = int(
                index.query(
                    "SELECT count(DISTINCT note) FROM tags WHERE tag = ? OR (tag >= ? AND tag < ?)",
                    (tag, tag + "/", tag + "0"),
                )[0][0]
            )
        page.append(TagCount(str(tag), int(count), with_nested))
    return page, len(rows) > limit, total


def tags(
    catalog: Catalog, prefix: str, after: str | None, limit: int
) -> tuple[list[TagCount], bool, int]:
    """Tags (case-folded, as the index keeps them) starting with ``prefix``, in order after
    ``after``: at most ``limit``, whether more follow, and how many match ``prefix``.
    Counts are the index's (kept fresh as listing is), not re-checked note by note."""
    want = prefix.strip().lstrip("#").casefold()
    return catalog.read(lambda ix: _tag_page(ix, want, after, limit))


__all__ = [
    "MAX_BACKLINKS",
    "MAX_OUTGOING",
    "MAX_TAGS_LIMIT",
    "IndexedLink",
    "LinkingNote",
    "Outgoing",
    "TagCount",
    "backlinks",
    "candidate_rows",
    "candidates",
    "linking",
    "outgoing",
    "tags",
]
