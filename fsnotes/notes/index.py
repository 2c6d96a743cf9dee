"""The search index of one workspace: an SQLite FTS5 file in the state directory.

A cache, never the truth. It holds, per note, what listing and search need without opening
the file (path, title, tags, links, size, modification time, device and inode, etag) and an
FTS5 table over title, headings, path, tags, frontmatter values and body. Everything in it
can be rebuilt from the workspace: a file that is missing, unreadable, corrupt, or of another
schema is replaced by an empty one (logged) and the scanner fills it again.

Rows are keyed by the note's components joined with U+0001, a character layer 1 never
admits in a name (:func:`sandbox.uri.check_name` refuses C0 controls) and that sorts below
every character that it does admit: SQLite's binary order of these keys is the order of the
component tuples, which is the order of a depth-first walk with sorted names, so a listing
pages by path with a plain ``key > ?`` keyset.

Concurrency: one connection per thread (sqlite3 objects must not cross threads
mid-transaction), WAL so that readers in this and other processes see the last committed
state and never a half-written batch, and a lock file that serialises creating or replacing
the file itself between processes (see :meth:`NoteIndex.open`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.root import FileIdentity, FileInfo

from ..security import statedir
from .markdown import NoteMeta

log = logging.getLogger("fsnotes.index")

Components = tuple[str, ...]

# Bump when the schema or what is indexed changes: an index of another version is rebuilt.
SCHEMA_VERSION = 1
INDEX_DIR = "index"  # below the state directory
SEP = "\x01"  # joins components in row keys (see the module docstring)
# A reader or writer waits this long for another connection's write to finish (a batch of
# the scanner commits in well under a second) before the call fails as busy.
BUSY_TIMEOUT_MS = 10_000
# Creating or replacing an index file waits this long for another process doing the same.
CREATE_LOCK_TIMEOUT_S = 30.0
# Title and path matches outside a search's ranking window that are still ranked (see
# NoteIndex.search): a query whose words fill more titles than this is broad anyway.
MAX_TIER_SEEKS = 50
# Page cache per connection: queries touch a few hundred pages; several worker threads each
# hold a connection, so the cache is kept small to bound memory (SQLite's default is 2 MiB).
CACHE_KIB = 4096
# Porter stemming over unicode61: case, diacritics and English word endings are ignored
# ("plan" finds "planned"); documented with the query syntax in fsnotes/notes/query.py.
TOKENIZER = "porter unicode61 remove_diacritics 2"
# FTS5 prefix indexes: ``ab*`` and ``abc*`` are answered from them instead of expanding every
# term of the vocabulary (the cost of a short prefix query otherwise grows with the vocabulary).
PREFIX_INDEXES = "2 3"
# Column order of the FTS table; ``bm25`` weights follow it (see fsnotes/notes/ranking.py).
# The text a query searches; then ``scope``, which holds one made-up token per folder above
# the note and per tag (and parent tag) it carries, so that a folder or tag filter is one
# more term of the same MATCH instead of a join (see scope_token).
TEXT_COLUMNS = ("path", "title", "headings", "tags", "front", "body")
FTS_COLUMNS = (*TEXT_COLUMNS, "scope")
BODY_COLUMN = FTS_COLUMNS.index("body")
# The second, small FTS table: title and path only, for the ranking tiers (a title match
# found there without walking the body's long lists of a common word).
TIER_COLUMNS = ("title", "path")

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


class IndexBusy(Exception):
    """Another connection held the index past the busy timeout; retry shortly."""


class IndexUnwritable(IndexBusy):
    """The state directory cannot take the index now (full, read-only, failing); retried
    later like a busy index, never taken for damage."""


class IndexCorrupt(Exception):
    """The index file cannot be used (damaged, not a database, wrong schema)."""


def _int64(value: int) -> int:
    """st_dev/st_ino are unsigned 64-bit (overlayfs sets high inode bits); SQLite integers
    are signed: store the same 64 bits as a signed value."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _uint64(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def key_of(parts: Components) -> str:
    return SEP.join(parts)


def parts_of(key: str) -> Components:
    return tuple(key.split(SEP)) if key else ()


def subtree_range(folder: Components) -> tuple[str, str] | None:
    """The half-open key range ``[lo, hi)`` of every note below ``folder`` (None: all)."""
    if not folder:
        return None
    base = key_of(folder)
    return base + SEP, base + chr(ord(SEP) + 1)


def classify(exc: sqlite3.Error) -> IndexBusy | IndexCorrupt:
    """A busy/locked database, or a state directory that cannot take it (full, read-only,
    I/O errors), is retryable; any other database error means the file is unusable and is
    rebuilt (the index holds nothing that cannot be recomputed)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _SQLITE_BUSY:
        return IndexBusy(str(exc))
    if code is not None and code & 0xFF in _SQLITE_ENVIRONMENT:
        return IndexUnwritable(str(exc))
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return IndexBusy(str(exc))
    return IndexCorrupt(str(exc))


@dataclass(frozen=True, slots=True)
class Row:
    """What the index knows about one note (no text)."""

    parts: Components
    dev: int
    ino: int
    mtime_ns: int
    size: int
    etag: str
    title: str
    tags: tuple[str, ...]

    @property
    def identity(self) -> FileIdentity:
        return FileIdentity(self.dev, self.ino)

    def matches(self, info: FileInfo) -> bool:
        """Whether ``info`` (a fresh stat) is the file this row was indexed from."""
        return (
            info.kind == "file"
            and info.identity.dev == self.dev
            and info.identity.ino == self.ino
            and info.mtime_ns == self.mtime_ns
            and info.size == self.size
        )


@dataclass(frozen=True, slots=True)
class Hit:
    row: Row
    score: float | None  # bm25: lower is better (SQLite's sign); None: not ranked by it
    tier: int  # how many of the tier expressions it matched (see search)
    snippet: str  # with the caller's marks around matched tokens
    body: str  # the indexed body (text after the frontmatter), to place the snippet
    body_start: int


@dataclass(frozen=True)
class Document:
    """One note's content, ready to be written to the index."""

    parts: Components
    info: FileInfo
    etag: str
    meta: NoteMeta


_ROW_COLUMNS = "key, dev, ino, mtime_ns, size, etag, title, tags"


def _row(record: Sequence[Any]) -> Row:
    return Row(
        parts=parts_of(record[0]),
        dev=_uint64(record[1]),
        ino=_uint64(record[2]),
        mtime_ns=record[3],
        size=record[4],
        etag=record[5],
        title=record[6],
        tags=tuple(json.loads(record[7])),
    )


_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE notes(
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    folder TEXT NOT NULL,
    name TEXT NOT NULL,
    path_fold TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT NOT NULL,
    title TEXT NOT NULL,
    title_fold TEXT NOT NULL,
    tags TEXT NOT NULL,
    body_start INTEGER NOT NULL
);
CREATE INDEX notes_folder ON notes(folder, name);
CREATE TRIGGER notes_counted AFTER INSERT ON notes
    BEGIN UPDATE meta SET value = value + 1 WHERE key = 'notes'; END;
CREATE TRIGGER notes_uncounted AFTER DELETE ON notes
    BEGIN UPDATE meta SET value = value - 1 WHERE key = 'notes'; END;
CREATE INDEX notes_path_fold ON notes(path_fold);
CREATE TABLE tags(tag TEXT NOT NULL, note INTEGER NOT NULL, PRIMARY KEY(tag, note)) WITHOUT ROWID;
CREATE INDEX tags_note ON tags(note);
CREATE TABLE links(note INTEGER NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX links_note ON links(note);
CREATE INDEX links_target ON links(target);
CREATE TABLE rejects(
    key TEXT PRIMARY KEY,
    folder TEXT NOT NULL,
    name TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX rejects_folder ON rejects(folder, name);
CREATE VIRTUAL TABLE fts USING fts5(
    {", ".join(FTS_COLUMNS)},
    tokenize = '{TOKENIZER}',
    prefix = '{PREFIX_INDEXES}'
);
CREATE VIRTUAL TABLE tfts USING fts5(
    {", ".join(TIER_COLUMNS)}, scope,
    tokenize = '{TOKENIZER}',
    prefix = '{PREFIX_INDEXES}'
);
"""


SCOPE_MARK = "\ue000"  # a private-use character: a word character to FTS5, never in a query


def scope_token(kind: str, value: str) -> str:
    """The made-up word that stands for "below folder ``value``" (kind ``f``) or "tagged
    ``value`` or a tag below it" (kind ``t``) in the scope column. It starts with
    :data:`SCOPE_MARK`, which the query parser removes from what a caller types, so no
    query term can ever match a scope word; the rest is ASCII letters and digits, which no
    tokenizer or stemmer changes."""
    digest = hashlib.sha256(f"{kind}\x00{value}".encode()).digest()
    return f"{SCOPE_MARK}{kind}{int.from_bytes(digest[:8], 'big')}"


def _scope_text(parts: Components, tags: Sequence[str]) -> str:
    words = [scope_token("f", key_of(parts[:depth])) for depth in range(1, len(parts))]
    seen: set[str] = set()
    for tag in tags:
        pieces = tag.casefold().split("/")
        for depth in range(1, len(pieces) + 1):
            name = "/".join(pieces[:depth])
            if name and name not in seen:
                seen.add(name)
                words.append(scope_token("t", name))
    return " ".join(words)


def _front_text(frontmatter: dict[str, Any]) -> str:
    """Frontmatter values as searchable text (title and tags have their own columns)."""
    out: list[str] = []
    for key, value in frontmatter.items():
        if key in ("title", "tags"):
            continue
        values = value if isinstance(value, list) else [value]
        out.extend(str(v) for v in values if v is not None and not isinstance(v, bool))
    return "\n".join(out)


def _path_text(parts: Components) -> str:
    stem = parts[-1].rsplit(".", 1)[0] if "." in parts[-1][1:] else parts[-1]
    return " / ".join((*parts[:-1], stem))


def _count_now(index: NoteIndex) -> Callable[[str], Future[int]]:
    def start(match: str) -> Future[int]:
        done: Future[int] = Future()
        done.set_result(index.match_count(match))
        return done

    return start


class _Connections:
    """One connection per thread to the current file; replaced all at once on rebuild."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.generation = 0
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def get(self) -> sqlite3.Connection:
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == self.generation:
            conn: sqlite3.Connection = held[1]
            return conn
        conn = _connect(self.path)
        with self._lock:
            self._all.append(conn)
        self._local.held = (self.generation, conn)
        return conn

    def reset(self) -> None:
        """Forget every connection (each thread reconnects on its next call)."""
        with self._lock:
            old, self._all = self._all, []
            self.generation += 1
        for conn in old:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _connect(path: Path) -> sqlite3.Connection:
    # check_same_thread=False only so that reset() may close connections from any thread;
    # each connection is used by the one thread that opened it.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    # The busy timeout first: every later statement (the journal-mode switch included)
    # then waits for another process instead of failing at once.
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: consistent; a cache may lose
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # the last commits on power loss
    # Statement journals and sorter spills stay in memory: on disk SQLite puts them in
    # /var/tmp or /tmp, which the Landlock jail does not grant, and a batch of the build
    # then fails with "unable to open database file" (the index rebuilt in a loop).
    conn.execute("PRAGMA temp_store=MEMORY")
    return conn


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

    def __init__(self, path: Path, fingerprint: str) -> None:
        """Private: use :meth:`open`."""
        self.path = path
        self.fingerprint = fingerprint
        self._conns = _Connections(path)
        self._file_identity: tuple[int, int] | None = None

    # --- life cycle ------------------------------------------------------------------------

    @classmethod
    def open(cls, state_dir: Path, identity: FileIdentity, fingerprint: str) -> NoteIndex:
        """The index of the workspace whose root directory is ``identity``, created (or
        replaced, when unusable or of another schema or ``fingerprint``) as needed.

        Keyed by the root's device and inode, not its path: a workspace renamed or mounted
        elsewhere keeps its index, and another directory given the old path gets its own.
        """
        folder = state_dir / INDEX_DIR
        statedir.prepare_dir(folder)
        path = folder / f"ws-{identity.dev}-{identity.ino}.sqlite3"
        index = cls(path, fingerprint)
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
            conn.executescript(f"BEGIN; {_SCHEMA} COMMIT;")
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('fingerprint', ?), ('complete', '0'), "
                "('notes', '0')",
                (self.fingerprint,),
            )
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            raise classify(exc) from None
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

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._conns.get().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise classify(exc) from None

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conns.get()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise classify(exc) from None
        try:
            yield conn
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

    # --- meta ------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        found = self._query("SELECT value FROM meta WHERE key=?", (key,))
        return str(found[0][0]) if found else None

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._query("SELECT key, value FROM meta")}

    def set_meta(self, values: dict[str, str]) -> None:
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                list(values.items()),
            )

    # --- writes ----------------------------------------------------------------------------

    def upsert(
        self,
        docs: Iterable[Document],
        *,
        meta: dict[str, str] | None = None,
        fresh: Collection[Components] = (),
    ) -> int:
        """Write (or rewrite) these notes, and ``meta``, in one transaction. ``fresh`` names
        notes the caller knows the index does not hold (no old rows to remove first)."""
        count = 0
        with self._write() as conn:
            for doc in docs:
                if doc.parts not in fresh:
                    self._delete_key(conn, key_of(doc.parts))
                self._insert(conn, doc)
                count += 1
            if meta:
                conn.executemany(
                    "INSERT INTO meta(key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    list(meta.items()),
                )
        return count

    def delete(self, keys: Iterable[Components]) -> int:
        with self._write() as conn:
            return sum(self._delete_key(conn, key_of(parts)) for parts in keys)

    def delete_folders(self, folders: Iterable[Components]) -> int:
        """Drop every note in and below each folder (a folder that vanished or was skipped)."""
        removed = 0
        with self._write() as conn:
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
                    self._delete_id(conn, note_id)
                removed += len(ids)
                if bounds is None:
                    conn.execute("DELETE FROM rejects")
                else:
                    conn.execute("DELETE FROM rejects WHERE key >= ? AND key < ?", bounds)
        return removed

    @staticmethod
    def _delete_key(conn: sqlite3.Connection, key: str) -> int:
        conn.execute("DELETE FROM rejects WHERE key=?", (key,))
        found = conn.execute("SELECT id FROM notes WHERE key=?", (key,)).fetchone()
        if found is None:
            return 0
        NoteIndex._delete_id(conn, found[0])
        return 1

    @staticmethod
    def _delete_id(conn: sqlite3.Connection, note_id: int) -> None:
        conn.execute("DELETE FROM fts WHERE rowid=?", (note_id,))
        conn.execute("DELETE FROM tfts WHERE rowid=?", (note_id,))
        conn.execute("DELETE FROM tags WHERE note=?", (note_id,))
        conn.execute("DELETE FROM links WHERE note=?", (note_id,))
        conn.execute("DELETE FROM notes WHERE id=?", (note_id,))

    @staticmethod
    def _insert(conn: sqlite3.Connection, doc: Document) -> None:
        meta, parts, info = doc.meta, doc.parts, doc.info
        cur = conn.execute(
            "INSERT INTO notes(key, folder, name, path_fold, dev, ino, mtime_ns, size, etag, "
            "title, title_fold, tags, body_start) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                key_of(parts),
                key_of(parts[:-1]),
                parts[-1],
                "/".join(parts).casefold(),
                _int64(info.identity.dev),
                _int64(info.identity.ino),
                info.mtime_ns,
                info.size,
                doc.etag,
                meta.title,
                meta.title.casefold(),
                json.dumps(meta.tags, ensure_ascii=False),
                meta.body_start_line,
            ),
        )
        note_id = cur.lastrowid
        path_text = _path_text(parts)
        scope = _scope_text(parts, meta.tags)
        conn.executemany(
            "INSERT OR IGNORE INTO tags(tag, note) VALUES (?, ?)",
            [(t.casefold(), note_id) for t in meta.tags],
        )
        conn.executemany(
            "INSERT INTO links(note, kind, target) VALUES (?, ?, ?)",
            [(note_id, link["type"], link["target"]) for link in meta.links],
        )
        conn.execute(
            f"INSERT INTO fts(rowid, {', '.join(FTS_COLUMNS)}) VALUES (?,?,?,?,?,?,?,?)",
            (
                note_id,
                path_text,
                meta.title,
                "\n".join(meta.all_headings),
                " ".join(meta.tags),
                _front_text(meta.frontmatter),
                meta.body,
                scope,
            ),
        )
        conn.execute(
            "INSERT INTO tfts(rowid, title, path, scope) VALUES (?,?,?,?)",
            (note_id, meta.title, path_text, scope),
        )

    # --- reads -----------------------------------------------------------------------------

    def count(self, folder: Components = ()) -> int:
        bounds = subtree_range(folder)
        if bounds is None:
            # Kept by triggers in the same transactions as the rows: count(*) would read the
            # whole table (milliseconds at 100k notes) on every query.
            return int(self._query("SELECT value FROM meta WHERE key = 'notes'")[0][0])
        return int(
            self._query("SELECT count(*) FROM notes WHERE key >= ? AND key < ?", bounds)[0][0]
        )

    def manifest(self, folder: Components) -> dict[str, tuple[int, int, int, int]]:
        """name -> (dev, ino, mtime_ns, size) of what was seen directly in ``folder``: the
        indexed notes and the files rejected as notes (not UTF-8, too large, unreadable),
        so that an unchanged rejected file is not read again on every rescan."""
        rows = self._query(
            "SELECT name, dev, ino, mtime_ns, size FROM notes WHERE folder=? UNION ALL "
            "SELECT name, dev, ino, mtime_ns, size FROM rejects WHERE folder=?",
            (key_of(folder), key_of(folder)),
        )
        return {r[0]: (_uint64(r[1]), _uint64(r[2]), r[3], r[4]) for r in rows}

    def reject(self, items: Iterable[tuple[Components, FileInfo]]) -> None:
        """Remember files that are not notes (and drop them from the notes, if there)."""
        with self._write() as conn:
            for parts, info in items:
                key = key_of(parts)
                self._delete_key(conn, key)
                conn.execute(
                    "INSERT INTO rejects(key, folder, name, dev, ino, mtime_ns, size) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (
                        key,
                        key_of(parts[:-1]),
                        parts[-1],
                        _int64(info.identity.dev),
                        _int64(info.identity.ino),
                        info.mtime_ns,
                        info.size,
                    ),
                )

    def folders(self) -> set[Components]:
        """Every folder that directly holds an indexed note or a remembered reject."""
        rows = self._query("SELECT folder FROM notes UNION SELECT folder FROM rejects")
        return {parts_of(r[0]) for r in rows}

    def get(self, parts: Components) -> Row | None:
        found = self._query(f"SELECT {_ROW_COLUMNS} FROM notes WHERE key=?", (key_of(parts),))
        return _row(found[0]) if found else None

    def page(
        self, folder: Components, after: Components | None, limit: int, tag: str | None
    ) -> list[Row]:
        """Up to ``limit`` notes below ``folder`` in path order after ``after``."""
        where, params = self._scope(folder, tag)
        if after is not None:
            where.append("n.key > ?")
            params.append(key_of(after))
        sql = f"SELECT {_prefixed('n')} FROM notes n"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY n.key LIMIT ?"
        return [_row(r) for r in self._query(sql, [*params, limit])]

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

    def search(
        self,
        match: str,
        tier_matches: Sequence[str],
        limit: int,
        window: int,
        weights: Sequence[float],
        marks: tuple[str, str, str],
        snippet_tokens: int,
        count: Callable[[str], Future[int]] | None = None,
    ) -> tuple[list[Hit], int]:
        """The ``limit`` best notes for the FTS5 expression ``match``, and how many match.
        Every expression is bound as a parameter, never spliced into the SQL.

        Order: how many of ``tier_matches`` (the same terms within one column of the small
        ``tfts`` table: title, path) a note matches, then bm25. bm25 reads every hit of every
        term, so it is computed for at most ``window`` matching notes, the most recently
        indexed ones (FTS5 reads rowids newest first and stops there); tier matches beyond
        them are still ranked in their tier, after the ones in the window, by recency. A
        query with at most ``window`` matches is ranked exactly. ``count`` may run the full
        count (needed only past the window) in another thread meanwhile.
        """
        matched = int(
            self._query(
                "SELECT count(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?)",
                (match, window + 1),
            )[0][0]
        )
        counting = (count or _count_now(self))(match) if matched > window else None
        rank = f"bm25(fts, {', '.join(str(float(w)) for w in weights)})"
        tiers = " + ".join(
            ["(rowid IN (SELECT rowid FROM tfts WHERE tfts MATCH ?))"] * len(tier_matches)
        )
        best: list[tuple[int, int, float | None]] = [
            (int(r[0]), int(r[2]), float(r[1]))
            for r in self._query(
                f"SELECT id, score, tier FROM (SELECT rowid AS id, {rank} AS score, "
                f"{tiers or '0'} AS tier FROM fts WHERE fts MATCH ? ORDER BY rowid DESC "
                "LIMIT ?) ORDER BY tier DESC, score LIMIT ?",
                [*tier_matches, match, window, limit],
            )
        ]
        if counting is not None and tier_matches:
            best = self._with_older_tiers(best, tier_matches, window, limit)
        hits = self._hits(best, match, marks, snippet_tokens)
        return hits, counting.result() if counting is not None else matched

    def _with_older_tiers(
        self,
        best: list[tuple[int, int, float | None]],
        tier_matches: Sequence[str],
        window: int,
        limit: int,
    ) -> list[tuple[int, int, float | None]]:
        """Add the newest title/path matches older than the window (no bm25: reading their
        hits is what the window avoids), ranked after the window's rows of their tier."""
        seen = {note_id for note_id, _tier, _score in best}
        tiers: dict[int, int] = {}
        for tier_match in tier_matches:
            for (note_id,) in self._query(
                "SELECT rowid FROM tfts WHERE tfts MATCH ? ORDER BY rowid DESC LIMIT ?",
                (tier_match, window + limit),
            ):
                tiers[note_id] = tiers.get(note_id, 0) + 1
        older = sorted(
            ((n, t, None) for n, t in tiers.items() if n not in seen),
            key=lambda row: (-row[1], -row[0]),
        )
        merged = best + older[:limit]
        merged.sort(key=lambda row: (-row[1], row[2] is None, row[2] or 0.0))
        return merged[:limit]

    def _excerpts(
        self, ids: list[int], match: str, marks: tuple[str, str, str], snippet_tokens: int
    ) -> dict[int, tuple[str, str]]:
        """(snippet, body) of these notes, in one pass over the rowid range they span: FTS5
        seeks to the range and reads it in order, and snippet() runs for the listed rows
        only. (``rowid IN (...)`` in the WHERE would make SQLite run the whole MATCH once
        per listed row, which for a prefix that expands to many words costs milliseconds
        each.)"""
        if not ids:
            return {}
        wanted = set(ids)
        placeholders = ", ".join("?" * len(ids))
        rows = self._query(
            f"SELECT rowid, CASE WHEN rowid IN ({placeholders}) THEN "
            f"snippet(fts, {BODY_COLUMN}, ?, ?, ?, ?) END, "
            f"CASE WHEN rowid IN ({placeholders}) THEN body END "
            "FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?",
            [*ids, *marks, snippet_tokens, *ids, match, min(ids), max(ids)],
        )
        return {int(r[0]): (str(r[1]), str(r[2])) for r in rows if int(r[0]) in wanted}

    def _hits(
        self,
        best: list[tuple[int, int, float | None]],
        match: str,
        marks: tuple[str, str, str],
        snippet_tokens: int,
    ) -> list[Hit]:
        if not best:
            return []
        ids = [note_id for note_id, _tier, _score in best]
        placeholders = ", ".join("?" * len(ids))
        excerpts = self._excerpts(
            [i for i, _tier, score in best if score is not None], match, marks, snippet_tokens
        )
        for note_id in ids:
            if note_id not in excerpts:  # ranked by tier alone, outside the window: a seek
                excerpts.update(self._excerpts([note_id], match, marks, snippet_tokens))
        rows = {
            int(r[-1]): r
            for r in self._query(
                f"SELECT {_ROW_COLUMNS}, body_start, id FROM notes WHERE id IN ({placeholders})",
                ids,
            )
        }
        hits: list[Hit] = []
        for note_id, tier, score in best:
            record = rows.get(note_id)
            if record is None:
                continue  # removed since (another connection's commit)
            snippet, body = excerpts.get(note_id, ("", ""))
            hits.append(
                Hit(
                    row=_row(record[:8]),
                    score=score,
                    tier=tier,
                    snippet=snippet,
                    body=body,
                    body_start=int(record[8]),
                )
            )
        return hits

    def match_count(self, match: str) -> int:
        return int(self._query("SELECT count(*) FROM fts WHERE fts MATCH ?", (match,))[0][0])

    def titled(self, folded: str, limit: int) -> list[Row]:
        """Notes whose casefolded title contains ``folded``, in path order, at most ``limit``."""
        return [
            _row(r)
            for r in self._query(
                f"SELECT {_ROW_COLUMNS} FROM notes WHERE instr(title_fold, ?) > 0 "
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
        total = int(self._query(f"SELECT count(*) FROM notes{where}", bounds)[0][0])
        rows = self._query(f"SELECT key FROM notes{where} ORDER BY key LIMIT ?", (*bounds, limit))
        return [parts_of(r[0]) for r in rows], total


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in _ROW_COLUMNS.split(","))


__all__ = [
    "BODY_COLUMN",
    "FTS_COLUMNS",
    "SCHEMA_VERSION",
    "Document",
    "Hit",
    "IndexBusy",
    "IndexCorrupt",
    "IndexUnwritable",
    "NoteIndex",
    "Row",
    "key_of",
    "parts_of",
    "subtree_range",
]
