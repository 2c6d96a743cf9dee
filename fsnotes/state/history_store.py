"""The history store: the bytes a tool replaced or removed, kept where the shared state is.

Every ``notes_update``, ``notes_move`` and confirmed ``notes_delete`` (and ``notes_restore``
over an existing note) first hands this store what is about to be replaced; only once that
copy is committed (on disk) does the change happen. Where the copies live follows the shared
state (:class:`~fsnotes.state.shared.SharedState`):

- **By default**, ``<state dir>/history.sqlite3``: one file, written atomically by SQLite
  (WAL, ``synchronous=FULL``), shared by the processes using that state directory.
- **With ``[state] database``** (PostgreSQL, several instances), tables of that database,
  the copies inside it (``bytea``): every instance lists and restores the same versions,
  whichever kept them. The copies are rows rather than files beside the database because
  the copy must be committed, with its version row, before the change (one transaction
  does both, and there is no second shared filesystem to keep consistent with it), and
  because a backup of the database is then a backup of the history.

Either way the copies are content-addressed (a blob is stored once however many versions
hold the same bytes), and a version is known by a number made of the time and 21 random
bits (:func:`~fsnotes.state.history_schema.new_ref`), never by a counter one store owns: a
number names one version of one note, so a number from another store, another deployment
or a typo is "no such version", never someone else's version. A version's bytes are
checked against its SHA-256 before they are handed out.

A version is written *pending*, the change is made, then it is *settled*. A process killed
in between leaves a pending version, which is resolved the next time anyone holding the
note's writers' lock (:meth:`HistoryStore.writing`, see :mod:`fsnotes.state.history_lock`)
looks at that note: if the note still holds exactly the kept bytes, the change never
happened and the version is dropped (nothing of value goes with it: those bytes are the
note); otherwise the version is settled. Pending versions are never listed, so a reader
never sees a version of a change that did not happen. Every writer holds the lock from the
copy to the settle, so a pending version seen under the lock belongs to a process that died.

Bounds: at most ``max_bytes`` (the stored blobs plus a row overhead per version, counted by
triggers in the same transactions) and versions at most ``max_age_s`` old; adding a version
prunes the expired ones and then the oldest until the new one fits. SQLite gives freed pages
back to the filesystem (``auto_vacuum=INCREMENTAL``); PostgreSQL's autovacuum reuses them.

Every failure is :class:`HistoryUnavailable` with a sentence saying whether the store is
busy (retry), full, or unusable; the caller then changes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fsnotes.state.database import SQL, Database
from fsnotes.state.history_lock import LOCK_NAME as LOCK_NAME
from fsnotes.state.history_lock import FileLock, NoteLocks, WritersLock
from fsnotes.state.history_schema import (
    POSTGRES_SCHEMA,
    SCHEMA_VERSION,
    SQLITE_SCHEMA,
    migrate_sqlite,
    new_ref,
    row_overhead,
    tables,
)
from fsnotes.state.history_schema import ROW_OVERHEAD_BYTES as ROW_OVERHEAD_BYTES
from fsnotes.state.sqlite import LocalDB

if TYPE_CHECKING:
    from fsnotes.state.shared import SharedState

log = logging.getLogger("fsnotes.history")

DB_NAME = "history.sqlite3"
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
# Give freed pages back to the filesystem once this many are free (4 KiB pages: 1 MiB), so
# that a prune does not cost a second write for a page or two.
VACUUM_FREE_PAGES = 256
# Versions pruned per query while making room.
PRUNE_BATCH = 64
# Expired versions deleted per statement (100,000 took 3.1 s in one statement on
# PostgreSQL, benchmarks/bench_history.py: a few times that would pass its 15 s
# statement timeout).
EXPIRED_BATCH = 5000
# Blobs checked for other holders per statement after versions expired (a statement's
# parameters stay far below SQLite's limit of 32,766).
BLOB_BATCH = 500
# Fresh numbers tried when one is taken (never, while adds take turns: each is above the
# last; a bound all the same, so that a damaged index cannot loop).
REF_ATTEMPTS = 4


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
    id: int  # the version's number (time and chance, see history_schema.new_ref)
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
    "v.ref, v.workspace, v.path, v.at, b.etag, b.size, v.principal, v.tool, v.moved_to"
)


def _version(row: tuple[object, ...]) -> Version:
    ref, ws, path, at, etag, size, principal, tool, moved_to = row
    return Version(
        id=int(str(ref)),
        workspace=str(ws),
        path=str(path),
        at=float(str(at)),
        etag=str(etag),
        size=int(str(size)),
        principal=str(principal),
        tool=str(tool),
        moved_to=None if moved_to is None else str(moved_to),
    )


def _open_sqlite(state_dir: Path) -> LocalDB:
    db = LocalDB(
        state_dir / DB_NAME,
        timeout=LOCK_TIMEOUT_S,
        error=_error,
        pragmas=(
            # Only takes before the first table (and WAL mode would freeze it).
            "PRAGMA auto_vacuum = INCREMENTAL",
            # Deleting a large copy inside a transaction spills its statement journal past
            # 64 KiB to a temp file, which SQLite makes outside the state directory (in
            # /var/tmp), where the jail lets nothing be created: "unable to open database
            # file". In memory it costs at most the pages one statement changes (a note's
            # size, 4 MiB at most).
            "PRAGMA temp_store = MEMORY",
        ),
    )
    db.create(SQLITE_SCHEMA)
    with db.immediate() as sql:
        migrate_sqlite(sql)
    with db.reading() as sql:
        (found,) = sql.execute("PRAGMA user_version").fetchone()
    if found != SCHEMA_VERSION:
        raise _error(f"cannot be used (it was made by another fsnotes version: {found})")
    return db


class HistoryStore:
    """Kept versions of notes, shared by the processes using one state directory, or by
    every instance using one PostgreSQL database (``shared``)."""

    def __init__(
        self,
        state_dir: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        clock: Callable[[], float],
        shared: SharedState | None = None,
    ) -> None:
        """Open (creating if needed) the store: ``shared``'s PostgreSQL database when it has
        one, else the state directory's file. HistoryUnavailable if busy or unusable."""
        self.state_dir = state_dir
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._clock = clock
        self._db: Database
        self._lock: WritersLock
        self._sqlite: LocalDB | None = None  # its own file, closed by close()
        if shared is None or shared.postgres is None:
            self._db = self._sqlite = _open_sqlite(state_dir)
            self._lock = FileLock(state_dir, _error)
        else:
            from fsnotes.state.postgres import PgDB

            pg = PgDB(shared.postgres, "history", error=_error)
            pg.create(POSTGRES_SCHEMA)
            self._db, self._lock = pg, NoteLocks(pg)
        self.where = self._db.where
        self._t = tables(self._db.dialect)
        self.row_overhead = row_overhead(self._db.dialect)
        # Several instances write side by side on PostgreSQL (a lock per note), so a pending
        # version of another note may be a change in flight there: making room never drops
        # one (on SQLite every writer takes turns, so one seen is a dead process's).
        self._room_from = "AND pending = 0" if self._db.dialect == "postgresql" else ""

    # --- the writers' lock ----------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self, workspace: str | None = None, path: str | None = None) -> Iterator[None]:
        """Hold the writers' lock of the note (of the whole store when none is named) for
        the block: keep a copy, make the change, settle. HistoryUnavailable when another
        writer holds it for more than :data:`LOCK_TIMEOUT_S`."""
        with self._lock.hold(_note(workspace, path), LOCK_TIMEOUT_S):
            yield

    @contextlib.contextmanager
    def writing_if_free(
        self, workspace: str | None = None, path: str | None = None
    ) -> Iterator[bool]:
        """The writers' lock if no one holds it right now (True), else False at once: for
        readers that can do without resolving pending versions."""
        with self._lock.hold_if_free(_note(workspace, path)) as held:
            yield held

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
        """Keep ``data``, the bytes now at ``path``, as a pending version; returns its
        number. Durable when this returns. Earlier pending versions of the note are resolved
        first (``data`` is what the note holds now), and the store pruned to make room."""
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
        t = self._t
        with self._db.immediate() as db:
            self._resolve_in(db, workspace, path, etag)
            row = db.execute(f"SELECT id FROM {t.blob} WHERE etag = ?", (etag,)).fetchone()
            if row is None:
                row = db.execute(
                    f"INSERT INTO {t.blob}(etag, size, data) VALUES (?, ?, ?) RETURNING id",
                    (etag, size, data),
                ).fetchone()
            blob = int(row[0])
            (last,) = db.execute(f"SELECT COALESCE(MAX(ref), 0) FROM {t.version}").fetchone()
            for attempt in range(REF_ATTEMPTS):
                try:
                    ref = new_ref(now, int(last) + attempt)
                except OverflowError as exc:
                    raise _error(f"cannot be used ({exc})") from None
                added = db.execute(
                    f"INSERT INTO {t.version}(ref, workspace, path, at, blob, principal, tool,"
                    " moved_to, pending) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)"
                    " ON CONFLICT(ref) DO NOTHING RETURNING id",
                    (ref, workspace, path, now, blob, principal, tool, moved_to),
                ).fetchone()
                if added is not None:
                    break
            else:
                raise _error("cannot be used (no free version number was found)")
            pruned = self._prune_in(db, now, keep=int(added[0]))
        if pruned:
            self._vacuum()
        return ref

    def settle(self, ref: int) -> None:
        """The change the pending version ``ref`` was kept for has happened.

        Committed without waiting for the disk (SQLite's ``synchronous=NORMAL``,
        PostgreSQL's asynchronous commit: atomic, and durable within moments), which saves a
        change one fsync: a settle lost to a power cut leaves the version pending, and the
        next look at the note settles it again, since the note no longer holds the kept
        bytes.
        """
        with self._db.transaction(durable=False) as db:
            done = db.execute(
                f"UPDATE {self._t.version} SET pending = 0 WHERE ref = ?", (ref,)
            ).rowcount
        if not done:
            log.warning("history version %d was gone before its settle (pruned meanwhile)", ref)

    def resolve_one(self, ref: int, current_etag: str | None) -> None:
        """Decide the pending version ``ref`` from what its note holds now (``None``: no
        note there): dropped if that is the kept bytes, else settled."""
        t = self._t
        with self._db.immediate() as db:
            row = db.execute(
                f"SELECT v.id, v.blob, b.etag FROM {t.version} v JOIN {t.blob} b"
                " ON b.id = v.blob WHERE v.ref = ? AND v.pending = 1",
                (ref,),
            ).fetchone()
            if row is not None:
                self._decide(db, int(row[0]), int(row[1]), str(row[2]) == current_etag)

    def resolve(self, workspace: str, path: str, current_etag: str | None) -> None:
        """Decide every pending version of the note (see :meth:`resolve_one`)."""
        with self._db.immediate() as db:
            self._resolve_in(db, workspace, path, current_etag)

    def has_pending(self, workspace: str, path: str) -> bool:
        with self._db.reading() as db:
            row = db.execute(
                f"SELECT 1 FROM {self._t.version} WHERE workspace = ? AND path = ?"
                " AND pending = 1 LIMIT 1",
                (workspace, path),
            ).fetchone()
        return row is not None

    def has_expired(self) -> bool:
        """Whether some version is past the age bound (and so due to be pruned)."""
        with self._db.reading() as db:
            row = db.execute(
                f"SELECT 1 FROM {self._t.version} WHERE at < ? LIMIT 1",
                (self._clock() - self.max_age_s,),
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
        t = self._t
        since = self._clock() - self.max_age_s
        where = "v.workspace = ? AND v.path = ? AND v.pending = 0 AND v.at >= ?"
        args = (workspace, path, since)
        with self._db.reading() as db:
            rows = db.execute(
                f"SELECT {_VERSION_COLUMNS} FROM {t.version} v JOIN {t.blob} b"
                f" ON b.id = v.blob WHERE {where} ORDER BY v.id DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
            (total,) = db.execute(
                f"SELECT COUNT(*) FROM {t.version} v WHERE {where}", args
            ).fetchone()
        return [_version(r) for r in rows], int(total)

    def version(self, workspace: str, path: str, ref: int) -> Version | None:
        """The settled version ``ref`` of that note within the age bound, if there is one
        (None too for a number that is another note's version, or no version at all)."""
        t = self._t
        with self._db.reading() as db:
            row = db.execute(
                f"SELECT {_VERSION_COLUMNS} FROM {t.version} v JOIN {t.blob} b"
                " ON b.id = v.blob WHERE v.ref = ? AND v.workspace = ? AND v.path = ?"
                " AND v.pending = 0 AND v.at >= ?",
                (ref, workspace, path, self._clock() - self.max_age_s),
            ).fetchone()
        return None if row is None else _version(row)

    def content(self, version: Version) -> bytes:
        """The kept bytes of ``version``, checked against its etag (SHA-256) before they
        are handed out: bytes that do not match are never returned."""
        with self._db.reading() as db:
            row = db.execute(
                f"SELECT data FROM {self._t.blob} WHERE etag = ?", (version.etag,)
            ).fetchone()
        if row is None:
            raise _error("no longer holds that version (it was pruned meanwhile)")
        data = bytes(row[0])
        if etag_of(data) != version.etag:
            raise _error("cannot be used (a kept copy is damaged: its bytes do not match)")
        return data

    def usage(self) -> tuple[int, int]:
        """The bytes counted against the size bound, and the number of versions."""
        with self._db.reading() as db:
            (used,) = db.execute(f"SELECT bytes FROM {self._t.usage}").fetchone()
            (count,) = db.execute(f"SELECT COUNT(*) FROM {self._t.version}").fetchone()
        return int(used), int(count)

    def close(self) -> None:
        """Close the state directory's file, every thread's connection to it (on PostgreSQL
        the shared state's pool is closed with it). Later uses raise HistoryUnavailable."""
        if self._sqlite is not None:
            self._sqlite.close()

    # --- inside a transaction -------------------------------------------------------------

    def _resolve_in(self, db: SQL, workspace: str, path: str, current_etag: str | None) -> None:
        t = self._t
        rows = db.execute(
            f"SELECT v.id, v.blob, b.etag FROM {t.version} v JOIN {t.blob} b ON b.id = v.blob"
            " WHERE v.workspace = ? AND v.path = ? AND v.pending = 1",
            (workspace, path),
        ).fetchall()
        for vid, blob, etag in rows:
            self._decide(db, int(vid), int(blob), str(etag) == current_etag)

    def _decide(self, db: SQL, vid: int, blob: int, unchanged: bool) -> None:
        if unchanged:
            log.info("dropping a pending history version: its change never happened")
            self._delete(db, vid, blob)
        else:
            db.execute(f"UPDATE {self._t.version} SET pending = 0 WHERE id = ?", (vid,))

    def _delete(self, db: SQL, vid: int, blob: int) -> None:
        db.execute(f"DELETE FROM {self._t.version} WHERE id = ?", (vid,))
        self._drop_unheld(db, [blob])

    def _drop_unheld(self, db: SQL, blobs: Sequence[int]) -> None:
        """Delete those of ``blobs`` no version holds any more."""
        t = self._t
        for i in range(0, len(blobs), BLOB_BATCH):
            batch = blobs[i : i + BLOB_BATCH]
            marks = ", ".join("?" * len(batch))
            db.execute(
                f"DELETE FROM {t.blob} WHERE id IN ({marks})"
                f" AND NOT EXISTS (SELECT 1 FROM {t.version} v WHERE v.blob = {t.blob}.id)",
                batch,
            )

    def _prune_in(self, db: SQL, now: float, keep: int | None) -> int:
        t = self._t
        keep_id = -1 if keep is None else keep
        # Expired ones by the thousand (after a month away that may be every version): few
        # statements, each far within PostgreSQL's statement timeout.
        pruned = 0
        while True:
            gone = db.execute(
                f"DELETE FROM {t.version} WHERE id IN (SELECT id FROM {t.version}"
                " WHERE at < ? AND id != ? ORDER BY id LIMIT ?) RETURNING blob",
                (now - self.max_age_s, keep_id, EXPIRED_BATCH),
            ).fetchall()
            self._drop_unheld(db, sorted({int(b) for (b,) in gone}))
            pruned += len(gone)
            if len(gone) < EXPIRED_BATCH:
                break
        while self._used(db) > self.max_bytes:
            oldest = db.execute(
                f"SELECT id, blob FROM {t.version} WHERE id != ? {self._room_from}"
                " ORDER BY id LIMIT ?",
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

    def _used(self, db: SQL) -> int:
        (used,) = db.execute(f"SELECT bytes FROM {self._t.usage}").fetchone()
        return int(used)

    def _vacuum(self) -> None:
        """Give free pages back to the filesystem (SQLite; best effort: they are reused
        otherwise). PostgreSQL's autovacuum does the same for its tables."""
        if not isinstance(self._db, LocalDB):
            return
        try:
            with self._db.reading() as db:
                (free,) = db.execute("PRAGMA freelist_count").fetchone()
                if int(free) >= VACUUM_FREE_PAGES:
                    # executescript steps the pragma to completion (execute frees one page).
                    db.executescript("PRAGMA incremental_vacuum;")
        except HistoryUnavailable as exc:
            log.info("history store not vacuumed: %s", exc)


def _note(workspace: str | None, path: str | None) -> tuple[str, str] | None:
    return None if workspace is None or path is None else (workspace, path)
