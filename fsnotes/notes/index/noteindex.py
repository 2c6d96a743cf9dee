"""The search index of one workspace: an SQLite FTS5 file in the state directory.

A cache, never the truth. It holds, per note, what listing and search need without opening
the file (path, title, tags, links, size, modification time, device and inode, etag) and an
FTS5 table over title, headings, path, tags, frontmatter values and body, which keeps their
words but not their text (contentless: see :mod:`fsnotes.notes.index.schema`). Everything in it
can be rebuilt from the workspace: a file that is missing, unreadable, corrupt, or of another
schema is replaced by an empty one (logged) and the scanner fills it again.

What is stored (schema, row keys, the words of the scope column) is
:mod:`fsnotes.notes.index.schema`; ranked search over it is :mod:`fsnotes.notes.index.search`.

Concurrency: one connection per thread (sqlite3 objects must not cross threads
mid-transaction), WAL so that readers in this and other processes see the last committed
state and never a half-written batch, and a lock file that serialises creating or replacing
the file itself between processes (see :meth:`NoteIndex.open`).

The connections and the meaning of SQLite's errors are
:mod:`fsnotes.notes.index.connections`; the rows a batch of new notes makes,
:mod:`fsnotes.notes.index.newnotes`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fsnotes.notes.index.connections import (
    CACHE_KIB,
    Connections,
    IndexBusy,
    IndexCorrupt,
    Tx,
    classify,
    state_errors,
)
from fsnotes.notes.index.counts import MatchCounts
from fsnotes.notes.index.db import sqlite
from fsnotes.notes.index.newnotes import (
    NOTE_INSERT,
    SIDE_INSERTS,
    NewNotes,
    note_row,
    side_rows,
    values_insert,
)
from fsnotes.notes.index.reads import IndexReads
from fsnotes.notes.index.schema import (
    DEFERRED_INDEXES,
    SCHEMA,
    SCHEMA_VERSION,
    Document,
    int64,
    key_of,
    subtree_range,
)
from fsnotes.notes.store import DEFAULT_EXTENSIONS
from fsnotes.state import statedir
from sandbox.root import FileIdentity, FileInfo
from sandbox.uri import Components

log = logging.getLogger("fsnotes.index")


INDEX_DIR = "index"  # below the state directory
# Creating or replacing an index file waits this long for another process doing the same.
CREATE_LOCK_TIMEOUT_S = 30.0
# The page cache of the connection that writes a full scan's batches: a batch of a thousand
# notes dirties several megabytes of pages (the FTS segments, the notes' indexes), and a
# cache that holds them makes a build about a fifth faster. Only that one connection, only
# while it scans. Since a batch's full-text words are written once, at its commit (see
# newnotes.WRITE_ORDER), 16 MiB builds as fast as 32 did (100k notes, runs alternated:
# 25-30 s either way) and the peak RSS is 119-121 MiB instead of 137-138.
BUILD_CACHE_KIB = 16 * 1024
# WAL pages after which a commit copies the WAL back into the file (a checkpoint): SQLite's
# default, and a build's. A batch of a build commits some 15 MiB of pages, so at the default
# every commit checkpointed, copying again the pages that the next batches rewrite (the
# full-text structure, the B-trees' inner pages); at 64 MiB of WAL a checkpoint comes every
# few batches. Measured at 100k notes (in-process, seven pairs of runs alternated): 1,551
# MiB written at the default, 1,233 so; wall 20.8-27.0 s and 20.3-24.9 s (the new value
# faster in five pairs of seven, within the shared machine's noise). The build's end copies
# and cuts the WAL (NoteIndex._compact), so the file serves at its size.
WAL_AUTOCHECKPOINT_PAGES = 1000
BUILD_WAL_AUTOCHECKPOINT_PAGES = 16_000
# A full scan that writes at least this many notes is a build (see NoteIndex.bulk).
BUILD_NOTES = 5_000
# FTS5's defaults: merge a level's segments once there are this many (automerge), merge
# them at once, whatever automerge says, past this many (crisismerge), and write the words
# pending in memory out as a new segment past this many bytes (hashsize).
FTS_AUTOMERGE = 4
FTS_CRISISMERGE = 16
FTS_HASHSIZE = 1024 * 1024
# During a build: no merging before the one at the end until a level holds this many
# segments (each level merged costs rewriting it; a 100k-note build makes about a hundred
# segments, one per batch). FTS5 allows at most 2,000 segments in all, so a vault of
# millions of notes still merges long before that; a query during the build looks up each
# term in at most this many segments per level (milliseconds).
BUILD_CRISISMERGE = 256
# During a build: a batch's words stay in memory until it commits (one segment per batch,
# not one per megabyte of words). A batch of a thousand notes of a few KiB each holds about
# 3 MiB of words; this bounds the memory a batch of large notes takes.
BUILD_HASHSIZE = 8 * 1024 * 1024


def _sql_text(value: str) -> str:
    """``value`` as an SQL string literal (executescript takes no parameters; the value is
    the index's own fingerprint, a hex digest, never user input)."""
    return "'" + value.replace("'", "''") + "'"


class NoteIndex(IndexReads):
    """The index file of one workspace. Methods raise :class:`IndexBusy` (retry) or
    :class:`IndexCorrupt` (call :meth:`recreate`); nothing else escapes from SQLite."""

    def __init__(
        self, path: Path, fingerprint: str, extensions: Sequence[str] = DEFAULT_EXTENSIONS
    ) -> None:
        """Private: use :meth:`open`."""
        self.path = path
        self.fingerprint = fingerprint
        # What counts as a note's extension: how a link's target is read (links.classify).
        # Part of the fingerprint, so an index never holds links read with other ones.
        self.extensions = tuple(extensions)
        self._conns = Connections(path)
        self._file_identity: tuple[int, int] | None = None
        self._counts = MatchCounts()

    # --- life cycle ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        state_dir: Path,
        identity: FileIdentity,
        fingerprint: str,
        extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    ) -> NoteIndex:
        """The index of the workspace whose root directory is ``identity``, created (or
        replaced, when unusable or of another schema or ``fingerprint``) as needed.
        ``extensions``: the workspace's note extensions (``fingerprint`` must cover them).

        Keyed by the root's device and inode, not its path: a workspace renamed or mounted
        elsewhere keeps its index, and another directory given the old path gets its own.
        """
        folder = state_dir / INDEX_DIR
        statedir.prepare_dir(folder)
        path = folder / f"ws-{identity.dev}-{identity.ino}.sqlite3"
        index = cls(path, fingerprint, extensions)
        with state_errors():
            index._prepare()
        return index

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _create_lock(self) -> contextlib.AbstractContextManager[None]:
        return statedir.exclusive(
            self.lock_path,
            timeout=CREATE_LOCK_TIMEOUT_S,
            held_by_other="another fsnotes process has been creating this search index",
        )

    def _usable(self) -> bool:
        try:
            with self._conns.using() as conn:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version != SCHEMA_VERSION:
                    return False
                found = conn.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
                return found is not None and found[0] == self.fingerprint
        except sqlite.Error as exc:
            problem = classify(exc, self.path.parent)
            if isinstance(problem, IndexBusy):
                raise problem from None
            return False

    def _prepare(self) -> None:
        if self.path.exists() and self._usable():
            self._remember_file()
            return
        with self._create_lock():
            self._conns.reset()
            if self.path.exists() and self._usable():  # another process made it meanwhile
                self._remember_file()
                return
            self._create_locked(reason="missing" if not self.path.exists() else "unusable")

    def _create_locked(self, *, reason: str) -> None:
        """Replace the file by an empty index (the create lock is held)."""
        self._conns.reset()
        self._counts.forget()
        if reason != "missing":
            log.warning("search index %s is %s; rebuilding it", self.path.name, reason)
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        # Created 0600 before SQLite opens it: SQLite gives the -wal and -shm files the
        # main file's permission bits.
        statedir.prepare_database(self.path)
        try:
            # The block ends before the except clause: reset() there closes the connection
            # (idle by then) before its files are removed.
            with self._conns.using() as conn:
                # Before any table: freed pages can be given back to the filesystem (see
                # _compact; a page freed by a later write is reused first, never lost).
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("PRAGMA journal_mode=WAL")
                # One transaction: the tables, the meta rows and the version appear together
                # or not at all. A file left half made (a full disk) would look damaged to
                # the next open, which would then rebuild, fail and rebuild again.
                conn.executescript(
                    f"BEGIN; {SCHEMA} INSERT INTO meta(key, value) VALUES "
                    f"('fingerprint', {_sql_text(self.fingerprint)}), ('complete', '0'), "
                    f"('notes', '0'); PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
                )
        except sqlite.Error as exc:
            problem = classify(exc, self.path.parent)
            self._conns.reset()
            # Nothing usable was made: leave no file, so the next try is a creation again
            # (not a "damaged" index to rebuild).
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")
            raise problem from None
        self._remember_file()

    def _remember_file(self) -> None:
        st = os.stat(self.path)
        self._file_identity = (st.st_dev, st.st_ino)
        self._counts.forget()  # another file's counts, or counts from before it was made

    def recreate(self) -> None:
        """After :class:`IndexCorrupt`: replace the file by an empty index, unless another
        process already did (then just use the new file)."""
        with state_errors(), self._create_lock():
            self._conns.reset()
            try:
                st = os.stat(self.path)
                replaced = (st.st_dev, st.st_ino) != self._file_identity
            except FileNotFoundError:
                replaced = False
            if replaced and self._usable():
                self._remember_file()
                return
            self._create_locked(reason="damaged")

    def close(self) -> None:
        """Close every thread's connection (a busy one when its block ends); later uses
        raise IndexUnavailable."""
        self._conns.close()

    # --- plumbing --------------------------------------------------------------------------

    def count_matches(self, match: str, cap: int) -> int:
        """Notes of the FTS table matching ``match``, counted up to ``cap`` (remembered
        while the full-text index is unchanged, see :mod:`fsnotes.notes.index.counts`)."""
        return self._counts.count(self.query, match, cap)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read statement (parameters bound); errors as IndexProblem."""
        try:
            with self._conns.using() as conn:
                return conn.execute(sql, params).fetchall()
        except sqlite.Error as exc:
            raise classify(exc, self.path.parent) from None

    @contextlib.contextmanager
    def _write(self) -> Iterator[Tx]:
        with self._conns.using() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite.Error as exc:
                raise classify(exc, self.path.parent) from None
            tx = Tx(conn)
            try:
                yield tx
                if tx.delta:
                    conn.execute(
                        "UPDATE meta SET value = value + ? WHERE key = 'notes'", (tx.delta,)
                    )
            except sqlite.Error as exc:
                with contextlib.suppress(sqlite.Error):
                    conn.execute("ROLLBACK")
                raise classify(exc, self.path.parent) from None
            except BaseException:
                with contextlib.suppress(sqlite.Error):
                    conn.execute("ROLLBACK")
                raise
            else:
                try:
                    conn.execute("COMMIT")
                except sqlite.Error as exc:
                    with contextlib.suppress(sqlite.Error):
                        conn.execute("ROLLBACK")
                    raise classify(exc, self.path.parent) from None

    @contextlib.contextmanager
    def bulk(self, notes: int) -> Iterator[None]:
        """For this thread's writes of a full scan that will write ``notes`` notes: a larger
        page cache while it lasts and, for a build (at least :data:`BUILD_NOTES`), FTS5's
        incremental merging paused (crisis merges only past :data:`BUILD_CRISISMERGE`
        segments, one segment per batch: :data:`BUILD_HASHSIZE`) and one merge at the
        end instead, which does the same work once rather than level by level (about a
        fifth less CPU for a build; the fewer crisis merges save about a quarter of FTS5's
        work again, measured at 10k notes), and checkpoints every
        :data:`BUILD_WAL_AUTOCHECKPOINT_PAGES`. A build also drops the
        :data:`~fsnotes.notes.index.schema.DEFERRED_INDEXES` and makes them again at its
        end (until then a lookup by stem or link target reads the whole table: slower,
        never wrong). The merge settings and the dropped indexes are persistent: a build
        killed halfway leaves them so, and every scan first puts them back."""
        with self._conns.using() as conn:
            building = notes >= BUILD_NOTES
            try:
                conn.execute(f"PRAGMA cache_size=-{BUILD_CACHE_KIB}")
                if building:
                    conn.execute(f"PRAGMA wal_autocheckpoint={BUILD_WAL_AUTOCHECKPOINT_PAGES}")
                self._merging(conn, building=building)
                self._deferred(conn, building=building)
            except sqlite.Error as exc:
                raise classify(exc, self.path.parent) from None
            try:
                yield
            finally:
                with contextlib.suppress(sqlite.Error):
                    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
                    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
                    self._merging(conn, building=False)
                    self._deferred(conn, building=False)
                    if building:
                        for table in ("fts", "tfts"):
                            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                        self._compact(conn)

    @staticmethod
    def _compact(conn: sqlite.Connection) -> None:
        """Give back what a build's final merge freed: the merge writes the full-text
        index anew and frees the segments it merged (as many pages again), which a file
        keeps as free pages unless vacuumed (the file is created with incremental
        auto-vacuum, see :meth:`_create_locked`); then copy the WAL into the file and cut
        it back (another process reading an older snapshot can keep the checkpoint from
        finishing: the WAL is then cut at a later checkpoint, never wrong)."""
        # executescript steps the pragma to its end (execute would free one page: a page
        # per step).
        conn.executescript("PRAGMA incremental_vacuum;")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @staticmethod
    def _deferred(conn: sqlite.Connection, *, building: bool) -> None:
        """Drop (``building``) or make (if missing) the indexes a build makes at its end."""
        for name, create in DEFERRED_INDEXES.items():
            conn.execute(f"DROP INDEX IF EXISTS {name}" if building else create)

    @staticmethod
    def _merging(conn: sqlite.Connection, *, building: bool) -> None:
        settings = (
            {"automerge": 0, "crisismerge": BUILD_CRISISMERGE, "hashsize": BUILD_HASHSIZE}
            if building
            else {
                "automerge": FTS_AUTOMERGE,
                "crisismerge": FTS_CRISISMERGE,
                "hashsize": FTS_HASHSIZE,
            }
        )
        for table in ("fts", "tfts"):
            for option, value in settings.items():
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES (?, ?)", (option, value))

    # --- meta ------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        found = self.query("SELECT value FROM meta WHERE key=?", (key,))
        return str(found[0][0]) if found else None

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.query("SELECT key, value FROM meta")}

    def set_meta(self, values: dict[str, str]) -> None:
        with self._write() as tx:
            tx.conn.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                list(values.items()),
            )

    # --- writes ----------------------------------------------------------------------------

    def prepare(self, docs: Sequence[Document]) -> NewNotes:
        """``docs`` (notes the index does not hold) made ready for :meth:`upsert`: pure
        Python, no connection, so the scanner's reader thread does it, not the writer."""
        return NewNotes.of(docs, self.extensions)

    def upsert(
        self,
        docs: Iterable[Document] | NewNotes,
        *,
        meta: dict[str, str] | None = None,
        fresh: Collection[Components] = (),
    ) -> int:
        """Write (or rewrite) these notes, and ``meta``, in one transaction. ``fresh`` names
        notes the caller knows the index does not hold (no old rows to remove first); a
        :class:`NewNotes` (from :meth:`prepare`) holds only such notes."""
        batch: NewNotes | None
        if isinstance(docs, NewNotes):
            batch, items, count = docs, [], len(docs.parts)
        else:
            items = list(docs)
            count = len(items)
            new = len(items) > 1 and all(doc.parts in fresh for doc in items)
            batch = self.prepare(items) if new else None
        with self._write() as tx:
            if batch is not None:
                self._insert_many(tx, batch)
            else:
                for doc in items:
                    if doc.parts not in fresh:
                        self._delete_key(tx, key_of(doc.parts))
                    self._insert(tx, doc, self.extensions)
            if meta:
                tx.conn.executemany(
                    "INSERT INTO meta(key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    list(meta.items()),
                )
        return count

    def delete(self, keys: Iterable[Components]) -> int:
        with self._write() as tx:
            return sum(self._delete_key(tx, key_of(parts)) for parts in keys)

    def delete_folders(self, folders: Iterable[Components]) -> int:
        """Drop every note in and below each folder (a folder that vanished or was skipped)."""
        removed = 0
        with self._write() as tx:
            conn = tx.conn
            for folder in folders:
                bounds = subtree_range(folder)
                if bounds is None:
                    ids = [r[0] for r in conn.execute("SELECT id FROM notes")]
                else:
                    ids = [
                        r[0]
                        for r in conn.execute(
                            "SELECT id FROM notes WHERE key >= ? AND key < ?", bounds
                        )
                    ]
                for note_id in ids:
                    self._delete_id(tx, note_id)
                removed += len(ids)
                for table in ("rejects", "attachments"):
                    if bounds is None:
                        conn.execute(f"DELETE FROM {table}")
                    else:
                        conn.execute(f"DELETE FROM {table} WHERE key >= ? AND key < ?", bounds)
        return removed

    @staticmethod
    def _delete_key(tx: Tx, key: str) -> int:
        conn = tx.conn
        conn.execute("DELETE FROM rejects WHERE key=?", (key,))
        found = conn.execute("SELECT id FROM notes WHERE key=?", (key,)).fetchone()
        if found is None:
            return 0
        NoteIndex._delete_id(tx, found[0])
        return 1

    @staticmethod
    def _delete_id(tx: Tx, note_id: int) -> None:
        conn = tx.conn
        conn.execute("DELETE FROM fts WHERE rowid=?", (note_id,))
        conn.execute("DELETE FROM tfts WHERE rowid=?", (note_id,))
        conn.execute("DELETE FROM tags WHERE note=?", (note_id,))
        conn.execute("DELETE FROM links WHERE note=?", (note_id,))
        conn.execute("DELETE FROM front WHERE note=?", (note_id,))
        conn.execute("DELETE FROM notes WHERE id=?", (note_id,))
        tx.delta -= 1

    @staticmethod
    def _insert(tx: Tx, doc: Document, extensions: Sequence[str]) -> None:
        """One note, row by row (SQLite picks its id)."""
        conn = tx.conn
        tx.delta += 1
        cur = conn.execute(NOTE_INSERT, note_row(doc))
        rows = side_rows(cur.lastrowid, doc, extensions)
        for table, sql in SIDE_INSERTS.items():
            conn.executemany(sql, rows[table])

    @staticmethod
    def _insert_many(tx: Tx, batch: NewNotes) -> None:
        """The notes of ``batch`` (which the index does not hold), a few statements per
        table, in :data:`~fsnotes.notes.index.newnotes.WRITE_ORDER` (each full-text table in
        one, last, so FTS5 writes one segment per batch), their values bound as parameters.
        The rows are those of :meth:`_insert`, and the ids the ones SQLite would pick there
        (one more than the largest, in order), so the index holds the same. Why: SQLite's
        work (tokenising, the FTS5 segments, the b-trees) then runs without Python's GIL,
        beside the scanner's reader thread, where a statement per row costs Python time
        (and a wait for the GIL) per row."""
        top = tx.conn.execute("SELECT max(id) FROM notes").fetchone()[0]
        base = 0 if top is None else int(top)
        if base + len(batch.parts) >= (1 << 63) - 1:
            # Past the largest rowid (SQLite would pick ids at random from here; 2**63
            # writes do not happen): start the index again, ids from 1.
            raise IndexCorrupt("the index has used up its note ids")
        for table, rows, values in batch.statements:
            values[0] = base
            tx.conn.execute(values_insert(table, rows), values)
        tx.delta += len(batch.parts)

    # --- reads -----------------------------------------------------------------------------

    def reject(self, items: Iterable[tuple[Components, FileInfo]]) -> None:
        """Remember files that are not notes (and drop them from the notes, if there)."""
        with self._write() as tx:
            for parts, info in items:
                key = key_of(parts)
                self._delete_key(tx, key)
                tx.conn.execute(
                    "INSERT INTO rejects(key, folder, name, dev, ino, mtime_ns, size) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (
                        key,
                        key_of(parts[:-1]),
                        parts[-1],
                        int64(info.identity.dev),
                        int64(info.identity.ino),
                        info.mtime_ns,
                        info.size,
                    ),
                )

    # --- attachments (fsnotes/notes/index/attachments.py): recorded, never read ------------------

    def set_attachments(self, folder: Components, entries: Iterable[tuple[str, FileInfo]]) -> None:
        """Record exactly these attachments directly in ``folder`` (the others are dropped)."""
        with self._write() as tx:
            tx.conn.execute("DELETE FROM attachments WHERE folder=?", (key_of(folder),))
            tx.conn.executemany(
                "INSERT INTO attachments(key, folder, name, dev, ino, mtime_ns, size) "
                "VALUES (?,?,?,?,?,?,?)",
                [
                    (
                        key_of((*folder, name)),
                        key_of(folder),
                        name,
                        int64(info.identity.dev),
                        int64(info.identity.ino),
                        info.mtime_ns,
                        info.size,
                    )
                    for name, info in entries
                ],
            )

    def put_attachment(self, parts: Components, info: FileInfo | None) -> None:
        """Record one attachment as ``info`` describes it, or drop it (None)."""
        with self._write() as tx:
            tx.conn.execute("DELETE FROM attachments WHERE key=?", (key_of(parts),))
            if info is not None:
                tx.conn.execute(
                    "INSERT INTO attachments(key, folder, name, dev, ino, mtime_ns, size) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (
                        key_of(parts),
                        key_of(parts[:-1]),
                        parts[-1],
                        int64(info.identity.dev),
                        int64(info.identity.ino),
                        info.mtime_ns,
                        info.size,
                    ),
                )
