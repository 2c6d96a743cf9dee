"""SQLite plumbing shared by the state directory's databases (replay, setup, audit): the
embedded :class:`~fsnotes.state.database.Database`, the default backend.

One connection per thread (sqlite3 connections must not be shared across threads
mid-transaction, and handlers run in worker threads), all closed by :meth:`LocalDB.close`
(:mod:`fsnotes.state.perthread`); WAL with full fsync; and critical sections as
``BEGIN IMMEDIATE`` transactions: they take the database's single write lock up front, so
processes sharing the state directory serialise on it.

Creation is serialised too (:meth:`LocalDB.create`, under the state directory's set-up
lock). Two connections switching a fresh database to WAL at the same moment can deadlock on
its lock; SQLite then refuses one of them at once, without calling the busy handler, so no
busy timeout helps (measured on a 2-core machine: 8 processes started together on fresh
directories, 30 times, saw 1 to 9 of the 240 starts fail with "database is locked"). Under
the lock no two fsnotes processes ever switch or migrate a database at once, and once a
database is in WAL mode (which is persistent) a new connection's switch is only a read.

Every SQLite error, from the first connection a new thread opens to the commit, reaches the
caller as the store's own exception (built by ``error``), with a sentence saying whether the
database is busy (retry) or unusable; never a raw ``sqlite3`` exception.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from fsnotes.state import statedir
from fsnotes.state.database import Dialect
from fsnotes.state.perthread import PerThread

# SQLite's primary result codes for "someone else holds the lock" (extended codes such as
# SQLITE_BUSY_SNAPSHOT share the prefix).
_BUSY_CODES = ("SQLITE_BUSY", "SQLITE_LOCKED")
_FULL_CODE = "SQLITE_FULL"


def describe(exc: sqlite3.Error) -> str:
    """What ``exc`` means for the caller, as the end of "the ... store <describe>"."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(_BUSY_CODES):
        return "is busy (another process is holding its lock); try again shortly"
    if name == _FULL_CODE:
        return "is full (the disk holding the state directory has no space left)"
    return f"cannot be used ({exc})"


class LocalDB:
    """A database file in the state directory with one connection per thread.

    ``error`` builds the exception every failure is raised as, from a phrase such as
    ``"is busy (...)"``; the store prefixes its own name. ``pragmas`` run on every new
    connection before the switch to WAL (settings such as ``auto_vacuum`` that a database
    takes only before its first table, and that WAL mode would otherwise freeze).
    """

    dialect: Dialect = "sqlite"

    def __init__(
        self,
        path: Path,
        *,
        timeout: float,
        error: Callable[[str], Exception],
        pragmas: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.where = str(path)
        self._timeout = timeout
        self._error = error
        self._pragmas = tuple(pragmas)
        self._conns = PerThread(
            self._open, closed=lambda: error("is closed (the server is shutting down)")
        )

    def create(self, schema: Sequence[str]) -> None:
        """Create or migrate the database (files private, WAL, ``schema`` in one transaction).

        Holds the state directory's set-up lock meanwhile, waiting for it up to the
        database's own lock timeout.
        """
        try:
            with statedir.setup_lock(self.path.parent, timeout=self._timeout):
                statedir.prepare_database(self.path)
                with self.immediate() as db:
                    for statement in schema:
                        db.execute(statement)
        except statedir.SetupLockTimeout as exc:
            raise self._error(f"is busy ({exc})") from None
        except statedir.StateFileError as exc:
            raise self._error(f"cannot be used ({exc})") from None

    def _open(self) -> sqlite3.Connection:
        """A new connection for the calling thread (see :class:`PerThread`)."""
        try:
            # timeout= installs the busy handler before any statement runs, the WAL switch
            # included. check_same_thread=False only so that close() may close an idle
            # connection of another thread; each is used by its own thread alone.
            db = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._error(describe(exc)) from None
        try:
            for pragma in self._pragmas:
                db.execute(pragma)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            db.close()
            raise self._error(describe(exc)) from None
        return db

    def close(self) -> None:
        """Close every thread's connection (a busy one when its block ends); later uses
        raise the store's exception."""
        self._conns.close()

    def watch(self, channel: str, on_change: Callable[[], bool]) -> None:
        """No change feed: a reader sees a change by reading (a local file, no wait)."""
        return None

    def notify(self, sql: object, channel: str) -> None:
        """Nothing to tell: there is no change feed (see :meth:`watch`)."""

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection for reads (and single autocommit statements)."""
        with self._conns.using() as db:
            try:
                yield db
            except sqlite3.Error as exc:
                raise self._error(describe(exc)) from None

    @contextlib.contextmanager
    def immediate(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed when the block ends, rolled back when it raises.

        When the write lock cannot be taken within the timeout, nothing is done and the
        store's exception is raised; so it is for any database error inside the block.
        Other exceptions from the block propagate unchanged after the rollback.
        """
        with self._conns.using() as db:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._error(describe(exc)) from None
            try:
                yield db
            except sqlite3.Error as exc:
                _rollback(db)
                raise self._error(describe(exc)) from None
            except BaseException:
                _rollback(db)
                raise
            try:
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(db)
                raise self._error(describe(exc)) from None

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """SQLite has one write lock per database: :meth:`immediate`. ``durable=False``: the
        commit is not synced (``synchronous=NORMAL`` for it: in WAL mode a power loss may
        drop it, never corrupt the file; the next synced commit makes it durable too)."""
        if durable:
            with self.immediate() as db:
                yield db
            return
        with self._conns.using() as db:  # the same connection as immediate()'s (nested)
            try:
                db.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise self._error(describe(exc)) from None
            try:
                with self.immediate() as db:
                    yield db
            finally:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("PRAGMA synchronous=FULL")


def _rollback(db: sqlite3.Connection) -> None:
    # SQLite may have rolled back already (some errors end the transaction themselves); a
    # failing ROLLBACK must not hide the error that led here.
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
