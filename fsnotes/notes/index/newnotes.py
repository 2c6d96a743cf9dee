"""A batch of new notes as the index's rows: the insert statements, row by row or a batch at
once with its values bound (:class:`NewNotes`), and the rows one note makes in each table. The
tables themselves are :mod:`fsnotes.notes.index.schema`'s; the writes are
:mod:`fsnotes.notes.index.noteindex`'s.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Bulk:
    """How a batch's rows go into one table: ``insert`` (``INSERT ... INTO t(columns)``),
    ``width`` values per row, of which the one at ``id_at`` is the note's place in its batch
    (1, 2, ...), to which the statement adds the index's largest id (parameter ``?1``)."""

    insert: str
    width: int
    id_at: int


_BULK = {
    "notes": _Bulk(f"INSERT INTO notes(id, {NOTE_COLUMNS})", 15, 0),
    "tags": _Bulk("INSERT OR IGNORE INTO tags(tag, note)", 2, 1),
    "links": _Bulk("INSERT INTO links(note, kind, embed, target, mode, want, leaf)", 7, 0),
    "front": _Bulk("INSERT INTO front(key, value, note)", 3, 2),
    "tfts": _Bulk("INSERT INTO tfts(rowid, title, path, scope)", 4, 0),
    "fts": _Bulk(f"INSERT INTO fts(rowid, {', '.join(FTS_COLUMNS)})", 8, 0),
}
# The order a batch's tables are written in, the full-text tables last and the main one at
# the very end, each full-text table in ONE statement per batch. Why: SQLite opens a
# statement savepoint for every statement that writes several rows inside a transaction,
# and at every savepoint FTS5 writes out the words it holds in memory as a new segment.
# With several statements per full-text table, or other tables' statements after them, a
# batch made some ten small segments in each, which the crisis merges and the final merge
# then read and wrote again; now each gets one segment per batch (at the commit, or at the
# main table's statement for the tier table). Measured at 100k notes (2 cores, runs
# alternated): a build took 30-33 s wall and 41-45 s CPU before, 21 s and 33 s after.
WRITE_ORDER = tuple(_BULK)
ONE_STATEMENT = frozenset({"fts", "tfts"})
# SQLite's bound on a statement's parameters (SQLITE_MAX_VARIABLE_NUMBER, 32766 by default
# since 3.32; the index needs 3.43, db.MIN_VERSION). A full-text table's statement holds a
# whole batch: scan.BATCH notes of 8 values, and ?1.
MAX_PARAMETERS = 32766
# Rows of the other tables per statement (a batch's links can outnumber its notes many
# times): cut into powers of two, so that the statements' texts (and SQLite's compiled
# statements, which the connection caches by text) are a few, made once.
MAX_CHUNK = 1024


def rows_per_statement(table: str) -> int:
    """The most rows one statement can write into ``table``."""
    return (MAX_PARAMETERS - 1) // _BULK[table].width


def chunks(table: str, rows: int) -> list[int]:
    """How ``rows`` rows of ``table`` are cut into statements: the full-text tables' in
    one, the others' in powers of two up to :data:`MAX_CHUNK` (largest first)."""
    if table in ONE_STATEMENT:
        if rows > rows_per_statement(table):
            raise ValueError(f"{rows} rows of {table} do not fit one statement")
        return [rows] if rows else []
    out = []
    while rows:
        size = min(MAX_CHUNK, 1 << (rows.bit_length() - 1))
        out.append(size)
        rows -= size
    return out


@functools.lru_cache(maxsize=256)
def values_insert(table: str, rows: int) -> str:
    """The statement that writes ``rows`` rows into ``table``: ``?1`` the index's largest
    id, then each row's values in order (``?2`` ...); the id column is ``?1`` plus the
    note's place in its batch."""
    if not 1 <= rows <= rows_per_statement(table):
        raise ValueError(f"{rows} rows in one statement of {table}")
    bulk = _BULK[table]
    tuples = []
    for row in range(rows):
        first = 2 + row * bulk.width
        cells = [
            f"?1 + ?{first + c}" if c == bulk.id_at else f"?{first + c}" for c in range(bulk.width)
        ]
        tuples.append(f"({', '.join(cells)})")
    return f"{bulk.insert} VALUES {', '.join(tuples)}"


# One statement of a batch: its table, its rows, and their values, after a placeholder for
# ``?1`` (the writer puts the index's largest id there).
Statement = tuple[str, int, list[Any]]


class NewNotes:
    """Notes the index does not hold, their rows ready for :meth:`NoteIndex.upsert`: the
    statements that write them (:func:`values_insert`, by table in :data:`WRITE_ORDER`),
    ids counted from 1 within the batch (the writer adds the index's largest id). The
    values are bound as parameters (no text is copied into SQL or JSON, so any text goes,
    NULs included); the documents are not kept (their texts are in the values)."""

    __slots__ = ("parts", "statements")

    def __init__(self, parts: list[Components], statements: list[Statement]) -> None:
        self.parts = parts
        self.statements = statements

    @classmethod
    def of(cls, docs: Sequence[Document], extensions: Sequence[str]) -> NewNotes:
        values: dict[str, list[Any]] = {table: [] for table in WRITE_ORDER}
        for place, doc in enumerate(docs, 1):
            values["notes"].append(place)
            values["notes"].extend(note_row(doc))
            for table, table_rows in side_rows(place, doc, extensions).items():
                for row in table_rows:
                    values[table].extend(row)
        statements: list[Statement] = []
        for table in WRITE_ORDER:
            width, flat, at = _BULK[table].width, values[table], 0
            for count in chunks(table, len(flat) // width):
                statements.append((table, count, [None, *flat[at : at + count * width]]))
                at += count * width
        return cls([doc.parts for doc in docs], statements)


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
