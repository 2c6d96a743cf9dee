"""The history store: the bytes a tool replaced or removed, in ``<state dir>/history.sqlite3``.

Every ``notes_update``, ``notes_move`` and confirmed ``notes_delete`` (and ``notes_restore``
over an existing note) first hands this store what is about to be replaced; only once that
copy is committed (WAL, ``synchronous=FULL``: on disk) does the change happen. The copies
live in the database itself (one file, written atomically by SQLite, shared by the
processes using the state directory), content-addressed: a blob is stored once however many
versions hold the same bytes.

A version is written *pending*, the change is made, then it is *settled*. A process killed
in between leaves a pending version, which is resolved the next time anyone holding the
writers' lock (:meth:`HistoryStore.writing`) looks at that note: if the note still holds
exactly the kept bytes, the change never happened and the version is dropped (nothing of
value goes with it: those bytes are the note); otherwise the version is settled. Pending
versions are never listed, so a reader never sees a version of a change that did not
happen. Every writer holds the lock from the copy to the settle, so a pending version seen
under the lock belongs to a process that died.

Bounds: at most ``max_bytes`` (the stored blobs plus :data:`ROW_OVERHEAD_BYTES` per version,
counted by triggers in the same transactions) and versions at most ``max_age_s`` old;
adding a version prunes the expired ones and then the oldest until the new one fits. Freed
pages go back to the filesystem (``auto_vacuum=INCREMENTAL``), so the file follows the bound.

Every failure is :class:`HistoryUnavailable` with a sentence saying whether the store is
busy (retry), full, or unusable; the caller then changes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fsnotes.state import statedir
from fsnotes.state.sqlite import LocalDB

log = logging.getLogger("fsnotes.history")

DB_NAME = "history.sqlite3"
LOCK_NAME = "history.lock"
# How long a writer waits for another one (a copy, one note's rename and a settle:
# milliseconds); past this the change is refused as busy rather than made without a copy.
LOCK_TIMEOUT_S = 10.0
# Default size bound. A version is a whole copy of a note; prose notes average a few KiB
# (2.2 KiB in the benchmark vaults), so 256 MiB keeps about 100,000 versions of such notes,
# or 64 of the largest note fsnotes writes (4 MiB): weeks of a model's edits, for the space
# of a few photos.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Default age bound: a mistake noticed after a month away can still be undone, and text a
# person deleted from their notes does not linger in the state directory for ever.
DEFAULT_MAX_AGE_S = 30 * 24 * 3600.0
# What one version row costs beyond its blob (the row, its three index entries, the blob
# row's header), counted against the size bound so that a flood of tiny versions is bounded
# too. Measured: the file grows by 334 bytes per version beyond the kept bytes (10,000
# versions of 115-byte notes: rows, indexes, page slack), rounded up.
ROW_OVERHEAD_BYTES = 384
# Give freed pages back to the filesystem once this many are free (4 KiB pages: 1 MiB), so
# that a prune does not cost a second write for a page or two.
VACUUM_FREE_PAGES = 256
# Versions pruned per query while making room.
PRUNE_BATCH = 64
SCHEMA_VERSION = 1

SCHEMA = (
    f"PRAGMA user_version = {SCHEMA_VERSION}",
    "CREATE TABLE IF NOT EXISTS blob ("
    " id INTEGER PRIMARY KEY, etag TEXT NOT NULL UNIQUE, size INTEGER NOT NULL,"
    " data BLOB NOT NULL)",
    # AUTOINCREMENT: a version id is never reused, so a restore by id never brings back
    # another version after the one named was pruned.
    "CREATE TABLE IF NOT EXISTS version ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, workspace TEXT NOT NULL, path TEXT NOT NULL,"
    " at REAL NOT NULL, blob INTEGER NOT NULL REFERENCES blob(id), principal TEXT NOT NULL,"
    " tool TEXT NOT NULL, moved_to TEXT, pending INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS version_note ON version(workspace, path, pending, id)",
    "CREATE INDEX IF NOT EXISTS version_at ON version(at)",
    "CREATE INDEX IF NOT EXISTS version_blob ON version(blob)",
    "CREATE TABLE IF NOT EXISTS usage (one INTEGER PRIMARY KEY CHECK (one = 1),"
    " bytes INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO usage(one, bytes) VALUES (1, 0)",
    "CREATE TRIGGER IF NOT EXISTS blob_in AFTER INSERT ON blob"
    " BEGIN UPDATE usage SET bytes = bytes + NEW.size; END",
    "CREATE TRIGGER IF NOT EXISTS blob_out AFTER DELETE ON blob"
    " BEGIN UPDATE usage SET bytes = bytes - OLD.size; END",
    "CREATE TRIGGER IF NOT EXISTS version_in AFTER INSERT ON version"
    f" BEGIN UPDATE usage SET bytes = bytes + {ROW_OVERHEAD_BYTES}; END",
    "CREATE TRIGGER IF NOT EXISTS version_out AFTER DELETE ON version"
    f" BEGIN UPDATE usage SET bytes = bytes - {ROW_OVERHEAD_BYTES}; END",
)


class HistoryUnavailable(Exception):
    """No copy can be kept or read: the store is busy, full or unusable (the message says
    which, and whether a retry may help)."""


def _error(what: str) -> HistoryUnavailable:
    return HistoryUnavailable(f"the history store {what}")


@dataclass(frozen=True)
class HistorySettings:
    """Whether copies are kept, and their bounds (``[history]`` in the configuration)."""

    enabled: bool = True
    max_bytes: int = DEFAULT_MAX_BYTES
    max_age_s: float = DEFAULT_MAX_AGE_S


@dataclass(frozen=True)
class Version:
    id: int
    workspace: str  # the workspace's file:// URI
    path: str  # the note's path in it, '/'-joined
    at: float  # when it was replaced (seconds since the epoch)
    etag: str  # SHA-256 of the kept bytes
    size: int
    principal: str  # who made the change that replaced it
    tool: str
    moved_to: str | None  # for notes_move: where the note went


def etag_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_VERSION_COLUMNS = (
    "v.id, v.workspace, v.path, v.at, b.etag, b.size, v.principal, v.tool, v.moved_to"
)


def _version(row: tuple[object, ...]) -> Version:
    vid, ws, path, at, etag, size, principal, tool, moved_to = row
    return Version(
        id=int(str(vid)),
        workspace=str(ws),
        path=str(path),
        at=float(str(at)),
        etag=str(etag),
        size=int(str(size)),
        principal=str(principal),
        tool=str(tool),
        moved_to=None if moved_to is None else str(moved_to),
    )


class HistoryStore:
    """Kept versions of notes, shared by the processes using one state directory."""

    def __init__(
        self,
        state_dir: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        clock: Callable[[], float],
    ) -> None:
        """Open (creating if needed) the store; HistoryUnavailable if busy or unusable."""
        self.state_dir = state_dir
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._clock = clock
        self._db = LocalDB(
            state_dir / DB_NAME,
            timeout=LOCK_TIMEOUT_S,
            error=_error,
            pragmas=(
                # Only takes before the first table (and WAL mode would freeze it).
                "PRAGMA auto_vacuum = INCREMENTAL",
                # Deleting a large copy inside a transaction spills its statement journal
                # past 64 KiB to a temp file, which SQLite makes outside the state directory
                # (in /var/tmp), where the jail lets nothing be created: "unable to open
                # database file". In memory it costs at most the pages one statement
                # changes (a note's size, 4 MiB at most).
                "PRAGMA temp_store = MEMORY",
            ),
        )
        self._db.create(SCHEMA)
        try:
            statedir.private_file(state_dir / LOCK_NAME)  # a link there stops start-up too
        except statedir.StateFileError as exc:
            raise _error(f"cannot be used ({exc})") from None
        with self._db.reading() as db:
            (found,) = db.execute("PRAGMA user_version").fetchone()
        if found != SCHEMA_VERSION:
            raise _error(f"cannot be used (it was made by another fsnotes version: {found})")

    # --- the writers' lock ----------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the writers' lock (every process, every thread) for the block: keep a copy,
        make the change, settle. HistoryUnavailable when another writer holds it for more
        than :data:`LOCK_TIMEOUT_S`."""
        try:
            with statedir.exclusive(
                self.state_dir / LOCK_NAME,
                timeout=LOCK_TIMEOUT_S,
                held_by_other="another fsnotes process has been keeping a copy",
            ):
                yield
        except statedir.SetupLockTimeout as exc:
            raise _error(f"is busy ({exc}); try again shortly") from None
        except statedir.StateFileError as exc:
            raise _error(f"cannot be used ({exc})") from None

    @contextlib.contextmanager
    def writing_if_free(self) -> Iterator[bool]:
        """The writers' lock if no one holds it right now (True), else False at once: for
        readers that can do without resolving pending versions."""
        try:
            with statedir.exclusive_or_none(self.state_dir / LOCK_NAME) as held:
                yield held
        except statedir.StateFileError as exc:
            raise _error(f"cannot be used ({exc})") from None

    # --- writing (under the writers' lock) ------------------------------------------------

    def add(
        self,
        workspace: str,
        path: str,
        data: bytes,
        *,
        principal: str,
        tool: str,
        moved_to: str | None = None,
    ) -> int:
        """Keep ``data``, the bytes now at ``path``, as a pending version; returns its id.
        Durable when this returns. Earlier pending versions of the note are resolved first
        (``data`` is what the note holds now), and the store pruned to make room."""
        size = len(data)
        # (A copy as large as the bound itself is kept, alone: the configuration's minimum
        # is the largest note, and its row's overhead is not worth refusing it for.)
        if size > self.max_bytes:
            raise _error(
                f"is full: a copy of {size:,} bytes is larger than its whole size bound "
                f"({self.max_bytes:,} bytes)"
            )
        etag = etag_of(data)
        now = self._clock()
        with self._db.immediate() as db:
            self._resolve_in(db, workspace, path, etag)
            db.execute(
                "INSERT INTO blob(etag, size, data) VALUES (?, ?, ?) ON CONFLICT(etag) DO NOTHING",
                (etag, size, data),
            )
            (blob,) = db.execute("SELECT id FROM blob WHERE etag = ?", (etag,)).fetchone()
            cursor = db.execute(
                "INSERT INTO version(workspace, path, at, blob, principal, tool, moved_to,"
                " pending) VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                (workspace, path, now, blob, principal, tool, moved_to),
            )
            vid = int(cursor.lastrowid or 0)
            pruned = self._prune_in(db, now, keep=vid)
        if pruned:
            self._vacuum()
        return vid

    def settle(self, vid: int) -> None:
        """The change the pending version ``vid`` was kept for has happened.

        Committed without waiting for the disk (``synchronous=NORMAL``: atomic, and durable
        with the next full commit or checkpoint), which saves a change one fsync: a settle
        lost to a power cut leaves the version pending, and the next look at the note
        settles it again, since the note no longer holds the kept bytes.
        """
        with self._db.reading() as conn:
            conn.execute("PRAGMA synchronous = NORMAL")
            try:
                with self._db.immediate() as db:
                    db.execute("UPDATE version SET pending = 0 WHERE id = ?", (vid,))
            finally:
                conn.execute("PRAGMA synchronous = FULL")

    def resolve_one(self, vid: int, current_etag: str | None) -> None:
        """Decide the pending version ``vid`` from what its note holds now (``None``: no
        note there): dropped if that is the kept bytes, else settled."""
        with self._db.immediate() as db:
            row = db.execute(
                "SELECT v.blob, b.etag FROM version v JOIN blob b ON b.id = v.blob"
                " WHERE v.id = ? AND v.pending = 1",
                (vid,),
            ).fetchone()
            if row is not None:
                self._decide(db, vid, int(row[0]), str(row[1]) == current_etag)

    def resolve(self, workspace: str, path: str, current_etag: str | None) -> None:
        """Decide every pending version of the note (see :meth:`resolve_one`)."""
        with self._db.immediate() as db:
            self._resolve_in(db, workspace, path, current_etag)

    def has_pending(self, workspace: str, path: str) -> bool:
        with self._db.reading() as db:
            row = db.execute(
                "SELECT 1 FROM version WHERE workspace = ? AND path = ? AND pending = 1 LIMIT 1",
                (workspace, path),
            ).fetchone()
        return row is not None

    def has_expired(self) -> bool:
        """Whether some version is past the age bound (and so due to be pruned)."""
        with self._db.reading() as db:
            row = db.execute(
                "SELECT 1 FROM version WHERE at < ? LIMIT 1", (self._clock() - self.max_age_s,)
            ).fetchone()
        return row is not None

    def prune(self) -> int:
        """Drop the versions past the age bound, then the oldest past the size bound;
        returns how many went."""
        with self._db.immediate() as db:
            pruned = self._prune_in(db, self._clock(), keep=None)
        if pruned:
            self._vacuum()
        return pruned

    # --- reading ----------------------------------------------------------------------------

    def versions(self, workspace: str, path: str, limit: int) -> tuple[list[Version], int]:
        """The note's settled versions within the age bound, newest first (at most
        ``limit``), and how many there are in all."""
        since = self._clock() - self.max_age_s
        where = "v.workspace = ? AND v.path = ? AND v.pending = 0 AND v.at >= ?"
        args = (workspace, path, since)
        with self._db.reading() as db:
            rows = db.execute(
                f"SELECT {_VERSION_COLUMNS} FROM version v JOIN blob b ON b.id = v.blob"
                f" WHERE {where} ORDER BY v.id DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
            (total,) = db.execute(f"SELECT COUNT(*) FROM version v WHERE {where}", args).fetchone()
        return [_version(r) for r in rows], int(total)

    def version(self, workspace: str, path: str, vid: int) -> Version | None:
        """The settled version ``vid`` of that note within the age bound, if there is one."""
        with self._db.reading() as db:
            row = db.execute(
                f"SELECT {_VERSION_COLUMNS} FROM version v JOIN blob b ON b.id = v.blob"
                " WHERE v.id = ? AND v.workspace = ? AND v.path = ? AND v.pending = 0"
                " AND v.at >= ?",
                (vid, workspace, path, self._clock() - self.max_age_s),
            ).fetchone()
        return None if row is None else _version(row)

    def content(self, version: Version) -> bytes:
        """The kept bytes of ``version``, checked against its etag."""
        with self._db.reading() as db:
            row = db.execute("SELECT data FROM blob WHERE etag = ?", (version.etag,)).fetchone()
        if row is None:
            raise _error("no longer holds that version (it was pruned meanwhile)")
        data = bytes(row[0])
        if etag_of(data) != version.etag:
            raise _error("cannot be used (a kept copy is damaged: its bytes do not match)")
        return data

    def usage(self) -> tuple[int, int]:
        """The bytes counted against the size bound, and the number of versions."""
        with self._db.reading() as db:
            (used,) = db.execute("SELECT bytes FROM usage").fetchone()
            (count,) = db.execute("SELECT COUNT(*) FROM version").fetchone()
        return int(used), int(count)

    # --- inside a transaction -------------------------------------------------------------

    def _resolve_in(
        self, db: sqlite3.Connection, workspace: str, path: str, current_etag: str | None
    ) -> None:
        rows = db.execute(
            "SELECT v.id, v.blob, b.etag FROM version v JOIN blob b ON b.id = v.blob"
            " WHERE v.workspace = ? AND v.path = ? AND v.pending = 1",
            (workspace, path),
        ).fetchall()
        for vid, blob, etag in rows:
            self._decide(db, int(vid), int(blob), str(etag) == current_etag)

    def _decide(self, db: sqlite3.Connection, vid: int, blob: int, unchanged: bool) -> None:
        if unchanged:
            log.info("dropping history version %d: its change never happened", vid)
            self._delete(db, vid, blob)
        else:
            db.execute("UPDATE version SET pending = 0 WHERE id = ?", (vid,))

    @staticmethod
    def _delete(db: sqlite3.Connection, vid: int, blob: int) -> None:
        db.execute("DELETE FROM version WHERE id = ?", (vid,))
        db.execute(
            "DELETE FROM blob WHERE id = ? AND NOT EXISTS (SELECT 1 FROM version WHERE blob = ?)",
            (blob, blob),
        )

    def _prune_in(self, db: sqlite3.Connection, now: float, keep: int | None) -> int:
        pruned = 0
        keep_id = -1 if keep is None else keep
        expired = db.execute(
            "SELECT id, blob FROM version WHERE at < ? AND id != ?",
            (now - self.max_age_s, keep_id),
        ).fetchall()
        for vid, blob in expired:
            self._delete(db, int(vid), int(blob))
            pruned += 1
        while self._used(db) > self.max_bytes:
            oldest = db.execute(
                "SELECT id, blob FROM version WHERE id != ? ORDER BY id LIMIT ?",
                (keep_id, PRUNE_BATCH),
            ).fetchall()
            if not oldest:
                break
            for vid, blob in oldest:
                self._delete(db, int(vid), int(blob))
                pruned += 1
                if self._used(db) <= self.max_bytes:
                    break
        return pruned

    @staticmethod
    def _used(db: sqlite3.Connection) -> int:
        (used,) = db.execute("SELECT bytes FROM usage").fetchone()
        return int(used)

    def _vacuum(self) -> None:
        """Give free pages back to the filesystem (best effort: they are reused otherwise)."""
        try:
            with self._db.reading() as db:
                (free,) = db.execute("PRAGMA freelist_count").fetchone()
                if int(free) >= VACUUM_FREE_PAGES:
                    # executescript steps the pragma to completion (execute frees one page).
                    db.executescript("PRAGMA incremental_vacuum;")
        except HistoryUnavailable as exc:
            log.info("history store not vacuumed: %s", exc)
