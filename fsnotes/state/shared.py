"""Where the state that instances must share lives: the state directory, or PostgreSQL.

Four stores are shared: the replay store (a confirmation executes once), the setup store
(pending setups and run-time grants), the audit log and the history (opened by
:mod:`fsnotes.state.history_store` itself: its SQLite file takes settings of its own). By
default each is a SQLite file in the state directory (``replay.sqlite3``,
``setup.sqlite3``, ``audit.sqlite3``, ``history.sqlite3``), which every process sharing that
directory on one machine shares. With ``[state] database = "postgresql://..."`` (or
``FSNOTES_DATABASE``) all four are tables of that one database, shared by every instance
that names it, on any machine.

The sealing keys stay a file (``seal-keys.json`` in each instance's state directory): every
instance must be given the same file (see docs/team.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fsnotes.state.database import Database
from fsnotes.state.sqlite import LocalDB

if TYPE_CHECKING:
    from fsnotes.state.postgres import Postgres

# The SQLite file of each store in the state directory.
DB_FILES = {
    "replay": "replay.sqlite3",
    "setup": "setup.sqlite3",
    "audit": "audit.sqlite3",
    "tasks": "tasks.sqlite3",
}


class StateUnavailable(Exception):
    """The configured database cannot be used at all (a bad DSN, its driver missing); the
    message names it without its password."""


@dataclass
class SharedState:
    """The backend of the shared stores; :meth:`database` gives each store its view."""

    state_dir: Path
    postgres: Postgres | None = field(default=None, repr=False)
    # The SQLite databases given out, closed with this (their connections are per thread).
    _sqlite: list[LocalDB] = field(default_factory=list, repr=False, init=False)

    @classmethod
    def open(cls, state_dir: Path, database: str | None, *, pooled: bool = True) -> SharedState:
        """The state directory's SQLite files, or the PostgreSQL database ``database``
        names (nothing is connected yet: each store creates its tables when it opens).
        ``pooled=False`` (a server before its jail): no connection pool, hence no thread,
        until :meth:`start_pool`."""
        if not database:
            return cls(state_dir)
        try:
            from fsnotes.state.postgres import DatabaseSettingError, Postgres
        except ImportError as exc:
            raise StateUnavailable(
                f"a PostgreSQL database is configured but its driver is missing ({exc.name}); "
                "install it with: pip install 'fsnotes[postgres]'"
            ) from None
        try:
            return cls(state_dir, Postgres(database, pooled=pooled))
        except DatabaseSettingError as exc:
            raise StateUnavailable(str(exc)) from None

    @property
    def where(self) -> str:
        """The backend, for the operator (never with a password)."""
        if self.postgres is None:
            return f"SQLite files in {self.state_dir}"
        return f"PostgreSQL at {self.postgres.where}"

    def database(self, name: str, *, timeout: float, error: Callable[[str], Exception]) -> Database:
        """Store ``name``'s database (``timeout``: SQLite's lock wait; PostgreSQL's waits
        are the session's, see :mod:`fsnotes.state.postgres`)."""
        if self.postgres is None:
            db = LocalDB(self.state_dir / DB_FILES[name], timeout=timeout, error=error)
            self._sqlite.append(db)
            return db
        from fsnotes.state.postgres import PgDB

        return PgDB(self.postgres, name, error=error)

    def start_pool(self) -> None:
        """Pool the database's connections from now on (a server calls this once its jail
        is up: the pool's threads must start inside it)."""
        if self.postgres is not None:
            self.postgres.start_pool()

    def tcp_ports(self) -> list[int]:
        return [] if self.postgres is None else self.postgres.tcp_ports()

    def read_paths(self) -> list[str]:
        return [] if self.postgres is None else self.postgres.read_paths()

    def close(self) -> None:
        """Close every database given out: each thread's SQLite connections, or the
        PostgreSQL pool and change feeds. Later uses raise the stores' exceptions."""
        for db in self._sqlite:
            db.close()
        if self.postgres is not None:
            with contextlib.suppress(Exception):
                self.postgres.close()
