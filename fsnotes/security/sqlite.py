"""SQLite plumbing shared by the state directory's databases (replay store, setup store).

One connection per thread (sqlite3 connections must not be shared across threads
mid-transaction, and handlers run in worker threads), WAL with full fsync, and critical
sections as ``BEGIN IMMEDIATE`` transactions: they take the database's single write lock
up front, so processes sharing the state directory serialise on it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path


class LocalDB:
    """A database file with one connection per thread."""

    def __init__(self, path: Path, *, timeout: float) -> None:
        self.path = path
        self._timeout = timeout
        self._local = threading.local()

    def connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            self._local.db = db
        return db

    @contextlib.contextmanager
    def immediate(self, busy: Callable[[str], Exception]) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed when the block ends, rolled back when it raises.

        ``busy`` builds the exception raised (nothing done) when the write lock cannot be
        taken within the timeout or the database is unusable.
        """
        db = self.connect()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise busy(str(exc)) from None
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")
