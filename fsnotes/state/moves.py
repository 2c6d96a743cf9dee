"""The move journal: a ``notes_move`` whose link update has begun and not yet finished.

A move with ``updateLinks`` renames the note, then rewrites the notes holding links to it,
one note at a time (:mod:`fsnotes.notes.tools.relink`). A server killed between the two
leaves some notes rewritten and some not, and nothing in the files says which link still
needs its rewrite. So before the rename the move writes one row here: the workspace, the
old and new paths, the principal, and the plan (where every affected link pointed before
the move, and the etag each note to rewrite had then); it is marked once the moved note's
own links are rewritten (the first rewrite, done alone); the row is deleted once the link
update has run to its end (skips included). A row found later is an interrupted move: the
same move called again reads it and finishes the job.

The row lives beside the tasks (:mod:`fsnotes.state.tasks`): the state directory's
``tasks.sqlite3``, or the PostgreSQL database every instance names, so a retry through
any instance finds it. At most one row per (workspace, old path): a new move of a note
that has the same old path replaces the row of an earlier one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fsnotes.state.database import Database

if TYPE_CHECKING:
    from fsnotes.state.shared import SharedState

# How long a writer waits for another one on SQLite: each statement is one small row.
LOCK_TIMEOUT_S = 10.0

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS move_journal ("
    " workspace TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL,"
    " principal TEXT NOT NULL, started_at REAL NOT NULL, plan TEXT NOT NULL,"
    " own_done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (workspace, src))",
)


class MoveJournalError(Exception):
    """The move journal is busy or unusable (the sentence says which)."""


def _error(what: str) -> MoveJournalError:
    return MoveJournalError(f"the move journal {what}")


@dataclass(frozen=True)
class MoveEntry:
    """One unfinished move as recorded (``plan`` decoded)."""

    workspace: str
    src: str
    dst: str
    principal: str
    started_at: float
    plan: dict[str, Any]
    own_done: bool  # the moved note's own links were rewritten


class SQLMoveJournal:
    """The move journal over a :class:`~fsnotes.state.database.Database` (see the module).
    Paths are the workspace-relative paths as the caller spells them (one spelling per
    note: the components joined by ``/``)."""

    def __init__(self, db: Database, *, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock
        db.create(SCHEMA)

    def begin(
        self, workspace: str, src: str, dst: str, principal: str, plan: dict[str, Any]
    ) -> None:
        """Record a move about to rename ``src`` to ``dst``; committed when this returns."""
        text = json.dumps(plan, separators=(",", ":"))
        with self._db.transaction() as db:
            db.execute("DELETE FROM move_journal WHERE workspace = ? AND src = ?", (workspace, src))
            db.execute(
                "INSERT INTO move_journal(workspace, src, dst, principal, started_at, plan)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (workspace, src, dst, principal, self._clock(), text),
            )

    def find(self, workspace: str, src: str, dst: str) -> MoveEntry | None:
        """The unfinished move of ``src`` to ``dst``, or ``None``."""
        with self._db.reading() as db:
            raw = db.execute(
                "SELECT principal, started_at, plan, own_done FROM move_journal"
                " WHERE workspace = ? AND src = ? AND dst = ?",
                (workspace, src, dst),
            ).fetchone()
        if raw is None:
            return None
        plan = json.loads(raw[2])
        plan = plan if isinstance(plan, dict) else {}
        return MoveEntry(workspace, src, dst, raw[0], float(raw[1]), plan, bool(raw[3]))

    def own_done(self, workspace: str, src: str, dst: str) -> None:
        """The moved note's own links were rewritten (a resume must not shift them again);
        committed when this returns."""
        with self._db.transaction() as db:
            db.execute(
                "UPDATE move_journal SET own_done = 1 WHERE workspace = ? AND src = ? AND dst = ?",
                (workspace, src, dst),
            )

    def end(self, workspace: str, src: str, dst: str) -> None:
        """The move's link update ran to its end: forget it."""
        with self._db.transaction() as db:
            db.execute(
                "DELETE FROM move_journal WHERE workspace = ? AND src = ? AND dst = ?",
                (workspace, src, dst),
            )


def open_moves(state: SharedState, *, clock: Callable[[], float]) -> SQLMoveJournal:
    """The move journal of this backend; MoveJournalError if it is busy or unusable."""
    return SQLMoveJournal(
        state.database("tasks", timeout=LOCK_TIMEOUT_S, error=_error), clock=clock
    )
