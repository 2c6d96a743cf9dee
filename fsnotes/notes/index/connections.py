"""Connections to an index file and what its SQLite errors mean.

One connection per thread (sqlite3 objects must not cross threads mid-transaction), all
retired at once when the file is replaced and closed with the index; the settings every
connection gets; a write transaction's note count; and the sorting of SQLite's errors into
busy (retry), damaged (rebuild), unavailable (retry later, report) and a refused query. The
file itself is :mod:`fsnotes.notes.index.noteindex`'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from fsnotes.notes.index.db import sqlite
from fsnotes.state import statedir
from fsnotes.state.perthread import PerThread

# A reader or writer waits this long for another connection's write to finish (a batch of
# the scanner commits in well under a second) before the call fails as busy.
BUSY_TIMEOUT_MS = 10_000
# Page cache per connection: queries touch a few hundred pages; several worker threads each
# hold a connection, so the cache is kept small to bound memory (SQLite's default is 2 MiB).
CACHE_KIB = 4096
# What a WAL is cut back to once a checkpoint has copied it all into the file (see
# _configure): a batch of a thousand notes writes a few MiB, so this keeps a batch's worth.
WAL_KEEP_BYTES = 16 * 1024 * 1024
_SQLITE_BUSY = (sqlite.SQLITE_BUSY, sqlite.SQLITE_LOCKED)
# Failures of the state directory, not of the file: rebuilding would not help (and on a full
# disk would delete the index and fill the disk again, once a second).
_SQLITE_ENVIRONMENT = (
    sqlite.SQLITE_FULL,
    sqlite.SQLITE_IOERR,
    sqlite.SQLITE_CANTOPEN,
    sqlite.SQLITE_READONLY,
    sqlite.SQLITE_PERM,
    sqlite.SQLITE_NOMEM,
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


_CORRUPT_CODES = (sqlite.SQLITE_CORRUPT, sqlite.SQLITE_NOTADB)
_UNAVAILABLE: dict[int, str] = {
    sqlite.SQLITE_FULL: "the disk holding the state directory is full",
    sqlite.SQLITE_READONLY: "the state directory is read-only",
    sqlite.SQLITE_PERM: "the state directory may not be written",
    sqlite.SQLITE_CANTOPEN: "the index file cannot be opened",
    sqlite.SQLITE_IOERR: "the state directory's disk reported an I/O error",
    sqlite.SQLITE_NOMEM: "the server ran out of memory",
}


# Under this much free space the state directory's disk is called full. SQLite reports a
# write that finds no space for its shared-memory or WAL file as an I/O error, not as
# SQLITE_FULL (seen on a full tmpfs), and "full" tells a person what to do where "I/O error"
# sends them looking for a failing disk; an index cannot be built in less than this anyway.
FULL_BELOW_BYTES = 1 << 20


def _nearly_full(folder: Path) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES


def classify(exc: sqlite.Error, folder: Path | None = None) -> IndexProblem:
    """Which problem an SQLite error is: busy (retry), damaged (rebuild: the index holds
    nothing that cannot be recomputed), unavailable (retry later and report), or a query
    FTS5 refused. Only what SQLite itself calls damage (a corrupt file, not a database, a
    missing table) rebuilds: any other error, not foreseen here, is retried, never a reason
    to throw the index away. ``folder``: the index's folder, whose free space tells an I/O
    error that is a full disk from one that is not."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc)
    if primary in _SQLITE_BUSY or "locked" in text:
        return IndexBusy(text)
    if primary in _CORRUPT_CODES or "malformed" in text or "no such table" in text:
        return IndexCorrupt(text)
    if primary == sqlite.SQLITE_IOERR and folder is not None and _nearly_full(folder):
        return IndexUnavailable(_UNAVAILABLE[sqlite.SQLITE_FULL])
    if primary in _UNAVAILABLE:
        return IndexUnavailable(_UNAVAILABLE[primary])
    if text.startswith("fts5:") or "unterminated string" in text:
        return QueryRejected(text)
    return IndexUnavailable("the search index reported an unexpected error")


class Connections:
    """One connection per thread to the current file, used inside :meth:`using`; all
    replaced at once on rebuild (:meth:`reset`) and all closed by :meth:`close`.

    Closing a connection from another thread while it runs a statement crashes the process
    inside SQLite, so an idle connection is closed at once and a busy one when its thread's
    block ends (:class:`~fsnotes.state.perthread.PerThread`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._threads: PerThread[sqlite.Connection] = PerThread(
            self._open, closed=lambda: IndexUnavailable("the search index is closed")
        )

    @property
    def open_count(self) -> int:
        return self._threads.open_count

    def using(self) -> contextlib.AbstractContextManager[sqlite.Connection]:
        """This thread's connection for the block (blocks nest). IndexUnavailable after
        :meth:`close`; sqlite.Error if it cannot be opened."""
        return self._threads.using()

    def reset(self) -> None:
        """Retire every connection (the file was replaced): each thread's next block opens
        a new one."""
        self._threads.retire()

    def close(self) -> None:
        self._threads.close()

    def _open(self) -> sqlite.Connection:
        """A new connection (its errors are the callers' to sort, as any statement's)."""
        # check_same_thread=False only so that an idle connection can be closed from another
        # thread; each is used by its own thread alone.
        conn = sqlite.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            _configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn


def _configure(conn: sqlite.Connection) -> None:
    # The busy timeout first: every later statement (the journal-mode switch included)
    # then waits for another process instead of failing at once.
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: consistent; a cache may lose
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # the last commits on power loss
    # Statement journals and sorter spills stay in memory: on disk SQLite puts them in
    # /var/tmp or /tmp, which the Landlock jail does not grant, and a batch of the build
    # then fails with "unable to open database file" (the index rebuilt in a loop).
    conn.execute("PRAGMA temp_store=MEMORY")
    # A checkpoint that empties the WAL truncates it to this size: without it a WAL keeps
    # the size of the largest transaction ever written (a build's final merge rewrites the
    # whole full-text index: hundreds of MiB beside the file for as long as it serves).
    conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")


class Tx:
    """One write transaction, and how many notes it adds (negative: removes).

    The count of notes in ``meta`` is updated once, when the transaction ends, and not by
    a trigger: a trigger makes every INSERT a statement with a savepoint, and FTS5 writes
    its pending words to disk at every savepoint, which made building an index several
    times slower."""

    __slots__ = ("conn", "delta")

    def __init__(self, conn: sqlite.Connection) -> None:
        self.conn = conn
        self.delta = 0


@contextlib.contextmanager
def state_errors() -> Iterator[None]:
    try:
        yield
    except statedir.SetupLockTimeout as exc:
        raise IndexBusy(str(exc)) from None
    except statedir.StateFileError as exc:  # a link or a non-file where the index goes
        raise IndexCorrupt(str(exc)) from None
