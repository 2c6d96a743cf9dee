"""The replay store: one confirmation executes at most once, across processes and instances.

A sealed confirmation carries a random nonce. Executing it means *claiming* the nonce; a
nonce can be claimed once. The claim and the action it guards run in one critical section
(:meth:`ReplayStore.claim`): the claim is ``INSERT ... ON CONFLICT DO NOTHING RETURNING``
inside a transaction that stays open while the action runs, and commits when it ends.

- On SQLite (the state directory's ``replay.sqlite3``) the transaction is ``BEGIN
  IMMEDIATE``: it takes the database's single write lock, so a second process presenting
  the same confirmation waits, then sees the nonce taken.
- On PostgreSQL (shared by many instances) the inserted row is what conflicts: another
  instance inserting the same nonce waits for this transaction to end (at most the
  session's lock timeout), then inserts nothing and sees the nonce taken. Claims of other
  nonces run side by side.

If the guarded action raises, the transaction rolls back and the nonce stays unclaimed
(callers that must spend a confirmation whose action failed catch the failure inside the
block, see :mod:`fsnotes.notes.tools.confirm`). A process killed inside the block never commits:
its claim is rolled back with it.

The interface is small on purpose: ``claim`` as a context manager, ``is_used`` and ``prune``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fsnotes.state.database import Database
from fsnotes.state.sqlite import LocalDB

if TYPE_CHECKING:
    from fsnotes.state.shared import SharedState

DB_NAME = "replay.sqlite3"
# How long a process waits for another process's critical section (a delete is one unlink
# plus a rename or two, milliseconds); past this the request fails instead of hanging.
LOCK_TIMEOUT_S = 10.0
# Expired nonces are useless (their state no longer verifies) and are pruned on every claim.
# Unexpired rows must never be dropped (that would re-open replay), so the bound fails
# closed: past MAX_ROWS live rows new claims are refused until some expire. Each row is one
# confirmation a person answered within the state lifetime (minutes), so the cap is far
# above any real use; a row is ~60 bytes, so the file stays under ~10 MB. (On PostgreSQL,
# claims running side by side each count before the others commit: the cap can be passed
# by as many rows as claims run at once.)
MAX_ROWS = 100_000


class AlreadyUsed(Exception):
    """The nonce was claimed before: this confirmation has been used."""


class StoreBusy(Exception):
    """Another process held the store's lock past LOCK_TIMEOUT_S, the database is
    unreachable, or it is unusable (the message says which, and whether a retry may help)."""


class ClaimNotRecorded(Exception):
    """The guarded action ran, but the claim could not be committed (a disk error): the
    action's effects stand and the nonce is not marked used."""


class StoreFull(Exception):
    """The store holds MAX_ROWS unexpired nonces; claims are refused until some expire."""


class ReplayStore(Protocol):
    def claim(self, nonce: str, expires_at: float) -> contextlib.AbstractContextManager[None]:
        """Claim ``nonce`` for the duration of the block; AlreadyUsed if taken before.

        The claim becomes permanent only if the block exits normally.
        """
        ...

    def is_used(self, nonce: str) -> bool: ...

    def prune(self, now: float) -> int: ...


def _error(what: str) -> StoreBusy:
    return StoreBusy(f"the confirmation store {what}")


SCHEMA = (
    "CREATE TABLE IF NOT EXISTS used_nonce ("
    " nonce TEXT PRIMARY KEY, expires_at REAL NOT NULL, used_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS used_nonce_exp ON used_nonce(expires_at)",
)


class SQLReplayStore:
    """A replay store over a :class:`~fsnotes.state.database.Database` (see the module)."""

    def __init__(self, db: Database, *, clock: Callable[[], float]) -> None:
        """Open (creating if needed) the store; StoreBusy if it is busy or unusable."""
        self._db = db
        self._clock = clock
        if db.dialect == "postgresql":
            # Rows another claim is pruning right now are skipped, not waited for (and two
            # prunes can never deadlock on each other's rows).
            self._prune_sql = (
                "DELETE FROM used_nonce WHERE nonce IN (SELECT nonce FROM used_nonce "
                "WHERE expires_at <= ? FOR UPDATE SKIP LOCKED)"
            )
        else:
            self._prune_sql = "DELETE FROM used_nonce WHERE expires_at <= ?"
        self._db.create(SCHEMA)

    @property
    def where(self) -> str:
        return self._db.where

    @contextlib.contextmanager
    def claim(self, nonce: str, expires_at: float) -> Iterator[None]:
        """See :meth:`ReplayStore.claim`. StoreBusy and StoreFull mean nothing was done (the
        block did not run, or raised and was rolled back); ClaimNotRecorded that the block ran
        but the commit failed."""
        ran = False
        try:
            with self._db.transaction() as db:
                now = self._clock()
                claimed = db.execute(
                    "INSERT INTO used_nonce(nonce, expires_at, used_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(nonce) DO NOTHING RETURNING nonce",
                    (nonce, expires_at, now),
                ).fetchall()
                if not claimed:
                    raise AlreadyUsed("this confirmation was already used")
                db.execute(self._prune_sql, (now,))
                (count,) = db.execute("SELECT COUNT(*) FROM used_nonce").fetchone()
                if count > MAX_ROWS:
                    raise StoreFull("too many confirmations in flight; try again in a few minutes")
                yield
                ran = True
        except StoreBusy as exc:
            if not ran:
                raise
            raise ClaimNotRecorded(
                f"the action was done, but {exc}, so the confirmation is not marked used"
            ) from None

    def is_used(self, nonce: str) -> bool:
        with self._db.reading() as db:
            row = db.execute("SELECT 1 FROM used_nonce WHERE nonce = ?", (nonce,)).fetchone()
        return row is not None

    def prune(self, now: float) -> int:
        """Drop expired nonces; returns how many."""
        with self._db.reading() as db:
            return int(db.execute(self._prune_sql, (now,)).rowcount)


class SQLiteReplayStore(SQLReplayStore):
    """A replay store in ``<state dir>/replay.sqlite3`` (WAL mode, shared by processes)."""

    def __init__(self, state_dir: Path, *, clock: Callable[[], float]) -> None:
        super().__init__(
            LocalDB(state_dir / DB_NAME, timeout=LOCK_TIMEOUT_S, error=_error), clock=clock
        )


def open_replay(state: SharedState, *, clock: Callable[[], float]) -> SQLReplayStore:
    """The replay store of this backend; StoreBusy if it is busy or unusable."""
    return SQLReplayStore(
        state.database("replay", timeout=LOCK_TIMEOUT_S, error=_error), clock=clock
    )
