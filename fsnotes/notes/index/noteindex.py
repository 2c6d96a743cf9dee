"""The search index of one workspace: an SQLite FTS5 file in the state directory.

A cache, never the truth. It holds, per note, what listing and search need without opening
the file (path, title, tags, links, size, modification time, device and inode, etag) and an
FTS5 table over title, headings, path, tags, frontmatter values and body. Everything in it
can be rebuilt from the workspace: a file that is missing, unreadable, corrupt, or of another
schema is replaced by an empty one (logged) and the scanner fills it again.

What is stored (schema, row keys, the words of the scope column) is
:mod:`fsnotes.notes.index.schema`; ranked search over it is :mod:`fsnotes.notes.index.search`.

Concurrency: one connection per thread (sqlite3 objects must not cross threads
mid-transaction), WAL so that readers in this and other processes see the last committed
state and never a half-written batch, and a lock file that serialises creating or replacing
the file itself between processes (see :meth:`NoteIndex.open`).

Longer than the rule of about 600 lines: opening, replacing, writing and reading the file
share that one connection discipline (which thread may close what, when a damaged file is
replaced), and splitting it would spread those rules over two modules.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fsnotes.notes.index.attachments import AttachmentRow
from fsnotes.notes.index.schema import (
    FTS_COLUMNS,
    ROW_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    Document,
    Row,
    front_text,
    int64,
    key_of,
    parts_of,
    path_text,
    row_of,
    scope_text,
    subtree_range,
    uint64,
)
from fsnotes.notes.store import DEFAULT_EXTENSIONS, stem_of
from fsnotes.notes.text import links as linkrules
from fsnotes.notes.text import where as whererules
from fsnotes.state import statedir
from sandbox.root import FileIdentity, FileInfo
from sandbox.uri import Components

log = logging.getLogger("fsnotes.index")


INDEX_DIR = "index"  # below the state directory
# A reader or writer waits this long for another connection's write to finish (a batch of
# the scanner commits in well under a second) before the call fails as busy.
BUSY_TIMEOUT_MS = 10_000
# Creating or replacing an index file waits this long for another process doing the same.
CREATE_LOCK_TIMEOUT_S = 30.0
# A tag on at most this many notes is listed by gathering its notes and sorting them (cheap
# when few carry it); one on more is listed by walking every note in path order and keeping
# the tagged ones (cheap when many do). Both cost about the same at this count.
RARE_TAG_NOTES = 2_000
# The page cache of the connection that writes a full scan's batches: a batch of a thousand
# notes dirties several megabytes of pages (the FTS segments, the notes' indexes), and a
# cache that holds them makes a build about a fifth faster. Only that one connection, only
# while it scans.
BUILD_CACHE_KIB = 32 * 1024
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
# Page cache per connection: queries touch a few hundred pages; several worker threads each
# hold a connection, so the cache is kept small to bound memory (SQLite's default is 2 MiB).
CACHE_KIB = 4096
_SQLITE_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
# Failures of the state directory, not of the file: rebuilding would not help (and on a full
# disk would delete the index and fill the disk again, once a second).
_SQLITE_ENVIRONMENT = (
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_NOMEM,
)


class IndexProblem(Exception):
    """The index cannot answer; the subclass says whether to retry, rebuild or report."""


class IndexBusy(IndexProblem):
    """Another connection held the index past the busy timeout; retry shortly."""


class IndexCorrupt(IndexProblem):
    """The index file cannot be used (damaged, not a database, wrong schema): rebuild it."""


class IndexUnavailable(IndexBusy):
    """The state directory cannot take the index now (full, read-only, failing): retried
    later like a busy index, never taken for damage; the message is one sentence without
    paths."""


class QueryRejected(IndexProblem):
    """FTS5 refused a query expression. Expressions are built from quoted terms only, so
    this is a query the parser let through by mistake: never a reason to rebuild."""


_CORRUPT_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_UNAVAILABLE: dict[int, str] = {
    sqlite3.SQLITE_FULL: "the disk holding the state directory is full",
    sqlite3.SQLITE_READONLY: "the state directory is read-only",
    sqlite3.SQLITE_PERM: "the state directory may not be written",
    sqlite3.SQLITE_CANTOPEN: "the index file cannot be opened",
    sqlite3.SQLITE_IOERR: "the state directory's disk reported an I/O error",
    sqlite3.SQLITE_NOMEM: "the server ran out of memory",
}


def _sql_text(value: str) -> str:
    """``value`` as an SQL string literal (executescript takes no parameters; the value is
    the index's own fingerprint, a hex digest, never user input)."""
    return "'" + value.replace("'", "''") + "'"


def classify(exc: sqlite3.Error) -> IndexProblem:
    """Which problem an SQLite error is: busy (retry), damaged (rebuild: the index holds
    nothing that cannot be recomputed), unavailable (retry later and report), or a query
    FTS5 refused. Only what SQLite itself calls damage (a corrupt file, not a database, a
    missing table) rebuilds: any other error, not foreseen here, is retried, never a reason
    to throw the index away."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc)
    if primary in _SQLITE_BUSY or "locked" in text:
        return IndexBusy(text)
    if primary in _CORRUPT_CODES or "malformed" in text or "no such table" in text:
        return IndexCorrupt(text)
    if primary in _UNAVAILABLE:
        return IndexUnavailable(_UNAVAILABLE[primary])
    if text.startswith("fts5:") or "unterminated string" in text:
        return QueryRejected(text)
    return IndexUnavailable("the search index reported an unexpected error")


class _Connections:
    """One connection per thread to the current file; all replaced at once on rebuild.

    A connection is only ever used, and closed, by the thread that opened it (or once that
    thread has ended): closing one from another thread while it runs a statement crashes
    the process inside SQLite. So :meth:`reset` closes the calling thread's connection and
    those of threads that have ended, and retires the others: each live thread closes its
    old connection the next time it asks for one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.generation = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        self._owners: list[tuple[threading.Thread, sqlite3.Connection]] = []

    def get(self) -> sqlite3.Connection:
        held = getattr(self._local, "held", None)
        if held is not None:
            generation, conn = held
            if generation == self.generation:
                return conn  # type: ignore[no-any-return]
            self._local.held = None
            self._close_own(conn)
        # check_same_thread=False only so that reset() may close the connection of a thread
        # that has ended; a live thread's connection is only touched by that thread.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        _configure(conn)
        self._local.held = (self.generation, conn)
        with self._lock:
            self._owners.append((threading.current_thread(), conn))
        return conn

    def _close_own(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            self._owners = [(t, c) for t, c in self._owners if c is not conn]
        with contextlib.suppress(sqlite3.Error):
            conn.close()

    def reset(self) -> None:
        """Retire every connection; close the ones no live thread can be using."""
        me = threading.current_thread()
        with self._lock:
            self.generation += 1
            closable = [c for t, c in self._owners if t is me or not t.is_alive()]
            self._owners = [(t, c) for t, c in self._owners if t is not me and t.is_alive()]
        self._local.held = None
        for conn in closable:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _configure(conn: sqlite3.Connection) -> None:
    # The busy timeout first: every later statement (the journal-mode switch included)
    # then waits for another process instead of failing at once.
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: consistent; a cache may lose
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # the last commits on power loss
    # Statement journals and sorter spills stay in memory: on disk SQLite puts them in
    # /var/tmp or /tmp, which the Landlock jail does not grant, and a batch of the build
    # then fails with "unable to open database file" (the index rebuilt in a loop).
    conn.execute("PRAGMA temp_store=MEMORY")


class _Tx:
    """One write transaction, and how many notes it adds (negative: removes).

    The count of notes in ``meta`` is updated once, when the transaction ends, and not by
    a trigger: a trigger makes every INSERT a statement with a savepoint, and FTS5 writes
    its pending words to disk at every savepoint, which made building an index several
    times slower."""

    __slots__ = ("conn", "delta")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.delta = 0


@contextlib.contextmanager
def _state_errors() -> Iterator[None]:
    try:
        yield
    except statedir.SetupLockTimeout as exc:
        raise IndexBusy(str(exc)) from None
    except statedir.StateFileError as exc:  # a link or a non-file where the index goes
        raise IndexCorrupt(str(exc)) from None


class NoteIndex:
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
        self._conns = _Connections(path)
        self._file_identity: tuple[int, int] | None = None

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
        with _state_errors():
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
            conn = self._conns.get()
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                return False
            found = conn.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
            return found is not None and found[0] == self.fingerprint
        except sqlite3.Error as exc:
            problem = classify(exc)
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
        if reason != "missing":
            log.warning("search index %s is %s; rebuilding it", self.path.name, reason)
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        # Created 0600 before SQLite opens it: SQLite gives the -wal and -shm files the
        # main file's permission bits.
        statedir.prepare_database(self.path)
        try:
            conn = self._conns.get()
            conn.execute("PRAGMA journal_mode=WAL")
            # One transaction: the tables, the meta rows and the version appear together or
            # not at all. A file left half made (a full disk) would look damaged to the next
            # open, which would then rebuild, fail and rebuild again.
            conn.executescript(
                f"BEGIN; {SCHEMA} INSERT INTO meta(key, value) VALUES "
                f"('fingerprint', {_sql_text(self.fingerprint)}), ('complete', '0'), "
                f"('notes', '0'); PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
            )
        except sqlite3.Error as exc:
            problem = classify(exc)
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

    def recreate(self) -> None:
        """After :class:`IndexCorrupt`: replace the file by an empty index, unless another
        process already did (then just use the new file)."""
        with _state_errors(), self._create_lock():
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
        self._conns.reset()

    # --- plumbing --------------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read statement (parameters bound); errors as IndexProblem."""
        try:
            return self._conns.get().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise classify(exc) from None

    @contextlib.contextmanager
    def _write(self) -> Iterator[_Tx]:
        conn = self._conns.get()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise classify(exc) from None
        tx = _Tx(conn)
        try:
            yield tx
            if tx.delta:
                conn.execute("UPDATE meta SET value = value + ? WHERE key = 'notes'", (tx.delta,))
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise classify(exc) from None
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        else:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise classify(exc) from None

    @contextlib.contextmanager
    def bulk(self, notes: int) -> Iterator[None]:
        """For this thread's writes of a full scan that will write ``notes`` notes: a larger
        page cache while it lasts and, for a build (at least :data:`BUILD_NOTES`), FTS5's
        incremental merging paused (crisis merges only past :data:`BUILD_CRISISMERGE`
        segments, one segment per batch: :data:`BUILD_HASHSIZE`) and one merge at the
        end instead, which does the same work once rather than level by level (about a
        fifth less CPU for a build; the fewer crisis merges save about a quarter of FTS5's
        work again, measured at 10k notes). The merge settings are persistent: a build
        killed halfway leaves them set, so every scan first puts them back."""
        conn = self._conns.get()
        building = notes >= BUILD_NOTES
        try:
            conn.execute(f"PRAGMA cache_size=-{BUILD_CACHE_KIB}")
            self._merging(conn, building=building)
        except sqlite3.Error as exc:
            raise classify(exc) from None
        try:
            yield
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
                self._merging(conn, building=False)
                if building:
                    for table in ("fts", "tfts"):
                        conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")

    @staticmethod
    def _merging(conn: sqlite3.Connection, *, building: bool) -> None:
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
            batch, items, count = docs, list(docs.docs), len(docs.parts)
            fresh = set(docs.parts)
        else:
            items = list(docs)
            count = len(items)
            new = len(items) > 1 and all(doc.parts in fresh for doc in items)
            batch = self.prepare(items) if new else None
        with self._write() as tx:
            if batch is None or not self._insert_many(tx, batch):
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
    def _delete_key(tx: _Tx, key: str) -> int:
        conn = tx.conn
        conn.execute("DELETE FROM rejects WHERE key=?", (key,))
        found = conn.execute("SELECT id FROM notes WHERE key=?", (key,)).fetchone()
        if found is None:
            return 0
        NoteIndex._delete_id(tx, found[0])
        return 1

    @staticmethod
    def _delete_id(tx: _Tx, note_id: int) -> None:
        conn = tx.conn
        conn.execute("DELETE FROM fts WHERE rowid=?", (note_id,))
        conn.execute("DELETE FROM tfts WHERE rowid=?", (note_id,))
        conn.execute("DELETE FROM tags WHERE note=?", (note_id,))
        conn.execute("DELETE FROM links WHERE note=?", (note_id,))
        conn.execute("DELETE FROM front WHERE note=?", (note_id,))
        conn.execute("DELETE FROM notes WHERE id=?", (note_id,))
        tx.delta -= 1

    @staticmethod
    def _insert(tx: _Tx, doc: Document, extensions: Sequence[str]) -> None:
        """One note, row by row (SQLite picks its id)."""
        conn = tx.conn
        tx.delta += 1
        cur = conn.execute(_NOTE_INSERT, _note_row(doc))
        rows = _side_rows(cur.lastrowid, doc, extensions)
        for table, sql in _SIDE_INSERTS.items():
            conn.executemany(sql, rows[table])

    @staticmethod
    def _insert_many(tx: _Tx, batch: NewNotes) -> bool:
        """The notes of ``batch`` (which the index does not hold), one statement per
        table: each table's rows are bound as one JSON array and expanded by ``json_each``
        inside SQLite. The rows are those of :meth:`_insert`, and the ids the ones SQLite
        would pick there (one more than the largest, in order), so the index holds the
        same. Why: SQLite's work (tokenising, the FTS5 segments, the b-trees) then runs
        without Python's GIL, beside the scanner's reader thread, and a statement per row
        costs Python time per row. Returns False, having written nothing, when the batch
        cannot go this way, for the caller to write it row by row."""
        if batch.payloads is None:
            return False
        top = tx.conn.execute("SELECT max(id) FROM notes").fetchone()[0]
        base = 0 if top is None else int(top)
        if base + len(batch.parts) >= (1 << 63) - 1:
            # Past the largest rowid (SQLite would pick ids at random from here; 2**63
            # writes do not happen): start the index again, ids from 1.
            raise IndexCorrupt("the index has used up its note ids")
        for table, text in batch.payloads:
            tx.conn.execute(_BULK_INSERTS[table], {"rows": text, "base": base})
        tx.delta += len(batch.parts)
        return True

    # --- reads -----------------------------------------------------------------------------

    def count(self, folder: Components = ()) -> int:
        bounds = subtree_range(folder)
        if bounds is None:
            # Kept in the same transactions as the rows (see _Tx): count(*) would read the
            # whole table (milliseconds at 100k notes) on every query.
            return int(self.query("SELECT value FROM meta WHERE key = 'notes'")[0][0])
        return int(
            self.query("SELECT count(*) FROM notes WHERE key >= ? AND key < ?", bounds)[0][0]
        )

    def manifest(self, folder: Components) -> dict[str, tuple[int, int, int, int]]:
        """name -> (dev, ino, mtime_ns, size) of what was seen directly in ``folder``: the
        indexed notes and the files rejected as notes (not UTF-8, too large, unreadable),
        so that an unchanged rejected file is not read again on every rescan."""
        rows = self.query(
            "SELECT name, dev, ino, mtime_ns, size FROM notes WHERE folder=? UNION ALL "
            "SELECT name, dev, ino, mtime_ns, size FROM rejects WHERE folder=?",
            (key_of(folder), key_of(folder)),
        )
        return {r[0]: (uint64(r[1]), uint64(r[2]), r[3], r[4]) for r in rows}

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

    def folders(self) -> set[Components]:
        """Every folder that directly holds an indexed note, a remembered reject or an
        attachment."""
        rows = self.query(
            "SELECT folder FROM notes UNION SELECT folder FROM rejects "
            "UNION SELECT folder FROM attachments"
        )
        return {parts_of(r[0]) for r in rows}

    def get(self, parts: Components) -> Row | None:
        found = self.query(f"SELECT {ROW_COLUMNS} FROM notes WHERE key=?", (key_of(parts),))
        return row_of(found[0]) if found else None

    def page(
        self,
        folder: Components,
        after: Components | None,
        limit: int,
        tag: str | None,
        front: Sequence[tuple[str, str]] = (),
    ) -> list[Row]:
        """Up to ``limit`` notes below ``folder`` in path order after ``after`` (with ``tag``
        and every frontmatter pair of ``front``, see fsnotes.notes.text.where)."""
        common = tag is not None and not self._rare(tag)
        where, params = self._scope(folder, None if common else tag)
        for key, value in front:
            # As for tags: a pair few notes carry is gathered first; one many carry is
            # checked note by note along the path order (a seek in the pair's b-tree each).
            if self._rare_pair(key, value):
                where.append("n.id IN (SELECT note FROM front WHERE key = ? AND value = ?)")
            else:
                where.append(
                    "EXISTS (SELECT 1 FROM front f WHERE f.key = ? AND f.value = ? "
                    "AND f.note = n.id)"
                )
            params.extend([key, value])
        if tag is not None and common:
            # A tag many notes carry: walk the notes in path order and keep the tagged ones,
            # which stops after a page; gathering and sorting every tagged note first would
            # cost milliseconds per ten thousand of them, on every page.
            where.append(
                "EXISTS (SELECT 1 FROM tags t WHERE t.note = n.id AND "
                "(t.tag = ? OR (t.tag >= ? AND t.tag < ?)))"
            )
            params.extend([tag, tag + "/", tag + "0"])
        if after is not None:
            where.append("n.key > ?")
            params.append(key_of(after))
        sql = f"SELECT {_prefixed('n')} FROM notes n"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY n.key LIMIT ?"
        return [row_of(r) for r in self.query(sql, [*params, limit])]

    def _rare(self, tag: str) -> bool:
        """Whether few enough notes carry ``tag`` (or a tag below it) to gather them all."""
        found = self.query(
            "SELECT count(*) FROM (SELECT 1 FROM tags WHERE tag = ? OR (tag >= ? AND tag < ?) "
            "LIMIT ?)",
            (tag, tag + "/", tag + "0", RARE_TAG_NOTES + 1),
        )
        return int(found[0][0]) <= RARE_TAG_NOTES

    def _rare_pair(self, key: str, value: str) -> bool:
        found = self.query(
            "SELECT count(*) FROM (SELECT 1 FROM front WHERE key = ? AND value = ? LIMIT ?)",
            (key, value, RARE_TAG_NOTES + 1),
        )
        return int(found[0][0]) <= RARE_TAG_NOTES

    @staticmethod
    def _scope(folder: Components, tag: str | None) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        bounds = subtree_range(folder)
        if bounds is not None:
            where.append("n.key >= ? AND n.key < ?")
            params.extend(bounds)
        if tag is not None:
            # A tag matches itself and its nested tags ('a' matches 'a/b'): '0' follows '/'.
            where.append("n.id IN (SELECT note FROM tags WHERE tag = ? OR (tag >= ? AND tag < ?))")
            params.extend([tag, tag + "/", tag + "0"])
        return where, params

    def titled(self, folded: str, limit: int) -> list[Row]:
        """Notes whose casefolded title contains ``folded``, in path order, at most ``limit``."""
        return [
            row_of(r)
            for r in self.query(
                f"SELECT {ROW_COLUMNS} FROM notes WHERE instr(title_fold, ?) > 0 "
                "ORDER BY key LIMIT ?",
                (folded, limit),
            )
        ]

    def paths_with_prefix(self, folded: str, limit: int) -> tuple[list[Components], int]:
        """Notes whose casefolded '/'-path starts with ``folded`` (path order), and how many."""
        if folded:
            bounds: tuple[str, ...] = (folded, folded + "\U0010ffff")
            where = " WHERE path_fold >= ? AND path_fold < ?"
        else:
            bounds, where = (), ""
        total = int(self.query(f"SELECT count(*) FROM notes{where}", bounds)[0][0])
        rows = self.query(f"SELECT key FROM notes{where} ORDER BY key LIMIT ?", (*bounds, limit))
        return [parts_of(r[0]) for r in rows], total

    # --- attachments (fsnotes/notes/index/attachments.py): recorded, never read ------------------

    def attachment_manifest(self, folder: Components) -> dict[str, tuple[int, int, int, int]]:
        """name -> (dev, ino, mtime_ns, size) of the attachments recorded in ``folder``."""
        rows = self.query(
            "SELECT name, dev, ino, mtime_ns, size FROM attachments WHERE folder=?",
            (key_of(folder),),
        )
        return {r[0]: (uint64(r[1]), uint64(r[2]), r[3], r[4]) for r in rows}

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

    def attachments_page(self, after: Components | None, limit: int) -> list[AttachmentRow]:
        """Up to ``limit`` attachments in path order after ``after``."""
        rows = self.query(
            "SELECT key, dev, ino, mtime_ns, size FROM attachments WHERE key > ? "
            "ORDER BY key LIMIT ?",
            (key_of(after) if after else "", limit),
        )
        return [AttachmentRow(parts_of(r[0]), uint64(r[1]), uint64(r[2]), r[3], r[4]) for r in rows]


_NOTE_COLUMNS = (
    "key, folder, name, path_fold, dev, ino, mtime_ns, size, etag, title, title_fold, tags, "
    "body_start, stem_fold"
)
_NOTE_INSERT = f"INSERT INTO notes({_NOTE_COLUMNS}) VALUES ({', '.join('?' * 14)})"
_FTS_INSERT = f"INSERT INTO fts(rowid, {', '.join(FTS_COLUMNS)}) VALUES ({', '.join('?' * 8)})"
# The rows of a note besides its ``notes`` row, by table, in the order they are written.
_SIDE_INSERTS = {
    "tags": "INSERT OR IGNORE INTO tags(tag, note) VALUES (?, ?)",
    "links": "INSERT INTO links(note, kind, embed, target, mode, want, leaf) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)",
    "front": "INSERT INTO front(key, value, note) VALUES (?, ?, ?)",
    "fts": _FTS_INSERT,
    "tfts": "INSERT INTO tfts(rowid, title, path, scope) VALUES (?,?,?,?)",
}


def _from_json(insert: str, width: int, id_at: int) -> str:
    """``insert`` (``INSERT ... INTO t(columns)``) taking its rows from the JSON array of
    arrays ``:rows``, whose column ``id_at`` holds the note's place in its batch (1, 2, ...)
    and gets ``:base`` added (json_extract: SQLite 3.38 has it built in; older builds
    have had JSON1 compiled in by default for years)."""
    values = ", ".join(
        f"json_extract(value, '$[{i}]')" + (" + :base" if i == id_at else "") for i in range(width)
    )
    return f"{insert} SELECT {values} FROM json_each(:rows)"


_BULK_INSERTS = {
    "notes": _from_json(f"INSERT INTO notes(id, {_NOTE_COLUMNS})", 15, 0),
    "tags": _from_json("INSERT OR IGNORE INTO tags(tag, note)", 2, 1),
    "links": _from_json("INSERT INTO links(note, kind, embed, target, mode, want, leaf)", 7, 0),
    "front": _from_json("INSERT INTO front(key, value, note)", 3, 2),
    "fts": _from_json(f"INSERT INTO fts(rowid, {', '.join(FTS_COLUMNS)})", 8, 0),
    "tfts": _from_json("INSERT INTO tfts(rowid, title, path, scope)", 4, 0),
}


# Notes per JSON array of a batch of new notes: a few hundred KiB of text per string, not
# the batch's megabytes in one. Measured at 100k notes: a build's peak RSS 145 MiB with one
# array per table and batch, 130 MiB with these (likely the allocator: megabyte strings
# made in the reader thread and freed in the writer's).
NOTES_PER_STATEMENT = 100


class NewNotes:
    """Notes the index does not hold, their rows ready for :meth:`NoteIndex.upsert`: each
    table's rows as one JSON array, ids counted from 1 within the batch (the writer adds
    the index's largest id). Once the rows are made the documents are let go (they would
    double the memory a batch takes): ``docs`` is kept only when ``payloads`` is None, a
    batch to write row by row (SQLite's JSON functions end a string at a NUL)."""

    __slots__ = ("docs", "parts", "payloads")

    def __init__(
        self,
        parts: list[Components],
        payloads: list[tuple[str, str]] | None,
        docs: Sequence[Document] = (),
    ) -> None:
        self.parts = parts
        self.payloads = payloads
        self.docs = docs

    @classmethod
    def of(cls, docs: Sequence[Document], extensions: Sequence[str]) -> NewNotes:
        payloads: list[tuple[str, str]] = []
        for start in range(0, len(docs), NOTES_PER_STATEMENT):
            tables: dict[str, list[tuple[Any, ...]]] = {"notes": []}
            tables.update({table: [] for table in _SIDE_INSERTS})
            for place, doc in enumerate(docs[start : start + NOTES_PER_STATEMENT], start + 1):
                tables["notes"].append((place, *_note_row(doc)))
                for table, rows in _side_rows(place, doc, extensions).items():
                    tables[table].extend(rows)
            for table, rows in tables.items():
                if rows:
                    payloads.append((table, json.dumps(rows, ensure_ascii=False)))
        parts = [doc.parts for doc in docs]
        if any("\\u0000" in text for _table, text in payloads):
            return cls(parts, None, docs)
        return cls(parts, payloads)


def _note_row(doc: Document) -> tuple[Any, ...]:
    """A note's ``notes`` row (without its id), in :data:`_NOTE_COLUMNS` order."""
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


def _side_rows(
    note_id: int | None, doc: Document, extensions: Sequence[str]
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of note ``note_id`` in every table but ``notes`` (see :data:`_SIDE_INSERTS`)."""
    meta, parts = doc.meta, doc.parts
    path_words = path_text(parts)
    front = list(whererules.pairs(meta.frontmatter))
    scope = scope_text(parts, meta.tags, front)
    return {
        "tags": [(t.casefold(), note_id) for t in meta.tags],
        "links": _link_rows(note_id, parts, meta.refs, extensions),
        "front": [(key, value, note_id) for key, value in front],
        "fts": [
            (
                note_id,
                path_words,
                meta.title,
                "\n".join(meta.all_headings),
                " ".join(meta.tags),
                front_text(meta.frontmatter),
                meta.body,
                scope,
            )
        ],
        "tfts": [(note_id, meta.title, path_words, scope)],
    }


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


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in ROW_COLUMNS.split(","))


__all__ = [
    "IndexBusy",
    "IndexCorrupt",
    "IndexProblem",
    "IndexUnavailable",
    "NewNotes",
    "NoteIndex",
    "QueryRejected",
    "classify",
]
