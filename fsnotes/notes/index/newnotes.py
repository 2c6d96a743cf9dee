"""A batch of new notes as the index's rows: the insert statements, row by row or a batch at
once from JSON arrays (:class:`NewNotes`), and the rows one note makes in each table. The
tables themselves are :mod:`fsnotes.notes.index.schema`'s; the writes are
:mod:`fsnotes.notes.index.noteindex`'s.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from fsnotes.notes.index.schema import (
    FTS_COLUMNS,
    ROW_COLUMNS,
    Document,
    front_text,
    int64,
    key_of,
    path_text,
    scope_text,
)
from fsnotes.notes.store import stem_of
from fsnotes.notes.text import links as linkrules
from fsnotes.notes.text import where as whererules
from sandbox.uri import Components

NOTE_COLUMNS = (
    "key, folder, name, path_fold, dev, ino, mtime_ns, size, etag, title, title_fold, tags, "
    "body_start, stem_fold"
)
NOTE_INSERT = f"INSERT INTO notes({NOTE_COLUMNS}) VALUES ({', '.join('?' * 14)})"
FTS_INSERT = f"INSERT INTO fts(rowid, {', '.join(FTS_COLUMNS)}) VALUES ({', '.join('?' * 8)})"
# The rows of a note besides its ``notes`` row, by table, in the order they are written.
SIDE_INSERTS = {
    "tags": "INSERT OR IGNORE INTO tags(tag, note) VALUES (?, ?)",
    "links": "INSERT INTO links(note, kind, embed, target, mode, want, leaf) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)",
    "front": "INSERT INTO front(key, value, note) VALUES (?, ?, ?)",
    "fts": FTS_INSERT,
    "tfts": "INSERT INTO tfts(rowid, title, path, scope) VALUES (?,?,?,?)",
}


def _from_json(insert: str, width: int, id_at: int) -> tuple[str, str]:
    """``insert`` (``INSERT ... INTO t(columns)``) and the ``SELECT`` that takes its rows
    from one JSON array of arrays, ``:rows{at}`` (``{at}`` left for :func:`bulk_insert` to
    fill), whose column ``id_at`` holds the note's place in its batch (1, 2, ...) and gets
    ``:base`` added (json_extract: SQLite 3.38 has it built in; older builds have had JSON1
    compiled in by default for years)."""
    cells = [
        f"json_extract(value, '$[{i}]')" + (" + :base" if i == id_at else "") for i in range(width)
    ]
    return insert, f"SELECT {', '.join(cells)} FROM json_each(:rows{{at}})"


_BULK = {
    "notes": _from_json(f"INSERT INTO notes(id, {NOTE_COLUMNS})", 15, 0),
    "tags": _from_json("INSERT OR IGNORE INTO tags(tag, note)", 2, 1),
    "links": _from_json("INSERT INTO links(note, kind, embed, target, mode, want, leaf)", 7, 0),
    "front": _from_json("INSERT INTO front(key, value, note)", 3, 2),
    "tfts": _from_json("INSERT INTO tfts(rowid, title, path, scope)", 4, 0),
    "fts": _from_json(f"INSERT INTO fts(rowid, {', '.join(FTS_COLUMNS)})", 8, 0),
}
# The order a batch's tables are written in: one statement per table, the full-text tables
# last and the main one at the very end. Why: SQLite opens a statement savepoint for every
# statement that writes several rows inside a transaction, and at every savepoint FTS5
# writes out the words it holds in memory as a new segment. With a statement per JSON
# array and the other tables' statements between them, a batch made some ten small
# segments in each full-text table, which the crisis merges and the final merge then read
# and wrote again; now each gets one segment per batch (at the commit, or at the main
# table's statement for the tier table). Measured at 100k notes (2 cores, runs alternated):
# a build took 30-33 s wall and 41-45 s CPU before, 21 s and 33 s after; peak RSS 128 MiB
# before, 136 MiB after (a batch's words wait in memory until its commit; the smaller page
# cache that this allowed, noteindex.BUILD_CACHE_KIB, brought it back to 120 MiB).
WRITE_ORDER = tuple(_BULK)
# JSON arrays per statement (SQLite's bound on a compound SELECT's terms is 500): a batch of
# BATCH notes has BATCH / NOTES_PER_ARRAY of them per table.
ARRAYS_PER_STATEMENT = 100


@functools.lru_cache(maxsize=64)
def bulk_insert(table: str, arrays: int) -> str:
    """The statement that writes ``arrays`` JSON arrays of rows (bound as ``:rows0``,
    ``:rows1``, ..., with ``:base``, see :func:`_from_json`) into ``table``: the arrays'
    ``SELECT`` joined by ``UNION ALL``."""
    if not 1 <= arrays <= ARRAYS_PER_STATEMENT:
        raise ValueError(f"{arrays} arrays in one statement (1 to {ARRAYS_PER_STATEMENT})")
    insert, select = _BULK[table]
    return f"{insert} " + " UNION ALL ".join(select.format(at=at) for at in range(arrays))


# Notes per JSON array of a batch of new notes: a few hundred KiB of text per string, not
# the batch's megabytes in one (a table's arrays are still bound to one statement).
# Measured at 100k notes: a build's peak RSS 145 MiB with one array per table and batch,
# 130 MiB with these (likely the allocator: megabyte strings made in the reader thread and
# freed in the writer's).
NOTES_PER_ARRAY = 100


class NewNotes:
    """Notes the index does not hold, their rows ready for :meth:`NoteIndex.upsert`: each
    table's rows as JSON arrays (of :data:`NOTES_PER_ARRAY` notes each, by table in
    :data:`WRITE_ORDER`), ids counted from 1 within the batch (the writer adds
    the index's largest id). Once the rows are made the documents are let go (they would
    double the memory a batch takes): ``docs`` is kept only when ``payloads`` is None, a
    batch to write row by row (SQLite's JSON functions end a string at a NUL)."""

    __slots__ = ("docs", "parts", "payloads")

    def __init__(
        self,
        parts: list[Components],
        payloads: dict[str, list[str]] | None,
        docs: Sequence[Document] = (),
    ) -> None:
        self.parts = parts
        self.payloads = payloads
        self.docs = docs

    @classmethod
    def of(cls, docs: Sequence[Document], extensions: Sequence[str]) -> NewNotes:
        payloads: dict[str, list[str]] = {table: [] for table in WRITE_ORDER}
        for start in range(0, len(docs), NOTES_PER_ARRAY):
            tables: dict[str, list[tuple[Any, ...]]] = {"notes": []}
            tables.update({table: [] for table in SIDE_INSERTS})
            for place, doc in enumerate(docs[start : start + NOTES_PER_ARRAY], start + 1):
                tables["notes"].append((place, *note_row(doc)))
                for table, rows in side_rows(place, doc, extensions).items():
                    tables[table].extend(rows)
            for table, rows in tables.items():
                if rows:
                    payloads[table].append(json.dumps(rows, ensure_ascii=False))
        parts = [doc.parts for doc in docs]
        if any("\\u0000" in text for arrays in payloads.values() for text in arrays):
            return cls(parts, None, docs)
        return cls(parts, {table: arrays for table, arrays in payloads.items() if arrays})


def note_row(doc: Document) -> tuple[Any, ...]:
    """A note's ``notes`` row (without its id), in :data:`NOTE_COLUMNS` order."""
    meta, parts, info = doc.meta, doc.parts, doc.info
    return (
        key_of(parts),
        key_of(parts[:-1]),
        parts[-1],
        "/".join(parts).casefold(),
        int64(info.identity.dev),
        int64(info.identity.ino),
        info.mtime_ns,
        info.size,
        doc.etag,
        meta.title,
        meta.title.casefold(),
        json.dumps(meta.tags, ensure_ascii=False),
        meta.body_start_line,
        stem_of(parts[-1]).casefold(),
    )


def side_rows(
    note_id: int | None, doc: Document, extensions: Sequence[str]
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of note ``note_id`` in every table but ``notes`` (see :data:`SIDE_INSERTS`)."""
    meta, parts = doc.meta, doc.parts
    path_words = path_text(parts)
    front = list(whererules.pairs(meta.frontmatter))
    scope = scope_text(parts, meta.tags, front)
    columns = {
        "body": meta.body,
        "path": path_words,
        "title": meta.title,
        "headings": "\n".join(_headings(meta.all_headings, meta.title)),
        "tags": " ".join(meta.tags),
        "front": front_text(meta.frontmatter),
        "scope": scope,
    }
    return {
        "tags": [(t.casefold(), note_id) for t in meta.tags],
        "links": _link_rows(note_id, parts, meta.refs, extensions),
        "front": [(key, value, note_id) for key, value in front],
        "fts": [(note_id, *(columns[c] for c in FTS_COLUMNS))],
        "tfts": [(note_id, meta.title, path_words, scope)],
    }


def _headings(headings: Sequence[str], title: str) -> list[str]:
    """The headings column: every heading but the one that is the title (a note's first
    level-1 heading usually is), whose words the title column holds already; counted twice,
    a title's words outweighed the body's."""
    out = list(headings)
    if title in out:
        out.remove(title)
    return out


def _link_rows(
    note_id: int | None,
    parts: Components,
    refs: Sequence[linkrules.Occurrence],
    extensions: Sequence[str],
) -> list[tuple[Any, ...]]:
    """One row per distinct link of a note: what it names (links.classify), stored so that
    backlinks are found by the ``leaf`` a target note's stem must equal."""
    rows: list[tuple[Any, ...]] = []
    seen: set[tuple[str, bool, str]] = set()
    for ref in refs:
        key = (ref.kind, ref.embed, ref.target)
        if key in seen:
            continue
        seen.add(key)
        target = linkrules.classify(ref, parts, extensions)
        rows.append(
            (note_id, ref.kind, int(ref.embed), ref.target, target.mode, target.want, target.leaf)
        )
    return rows


def prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in ROW_COLUMNS.split(","))
