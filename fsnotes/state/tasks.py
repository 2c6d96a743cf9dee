"""The task store: the state and result of every MCP task (the Tasks extension), durable.

A task is a ``tools/call`` the server answered with a task handle instead of its result
(:mod:`fsnotes.runtime.tasks` runs it). Its row holds everything ``tasks/get`` shows: the
status, the status message, the input it waits for, and at the end its result or error. The
row lives in the shared backend (:class:`~fsnotes.state.shared.SharedState`): the state
directory's ``tasks.sqlite3`` (every process on one machine), or the PostgreSQL database
every instance behind a balancer names. So any instance answers ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` for any task; only the instance that runs a task
(its ``owner``) writes its progress and its end.

Guarantees:

- A task is never run twice: rows are created by the instance that runs the work, and no
  code path starts work for an existing row.
- A task is never silently lost: its owner beats (:meth:`SQLTaskStore.beat`) while it runs;
  a row not yet ended whose beat is older than ``stale_after`` reads as ``failed`` (and is
  written so, once, by whichever instance reads it first, with a conditional update the
  owner's own late write cannot undo: every owner write checks the row is not yet ended).
- Only the principal that started a task sees it: every read and write names the principal,
  and a row of another principal is answered exactly like one that does not exist.
- A row is kept ``ttl_ms`` after its last change or beat (its result for that long after
  it ended; a task running longer than its TTL is kept while it runs), then pruned.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fsnotes.state.database import SQL, Database

if TYPE_CHECKING:
    from fsnotes.state.shared import SharedState

# How long a writer waits for another one on SQLite: each statement here is one small row
# write, milliseconds; past this the request fails with a clear error instead of hanging.
LOCK_TIMEOUT_S = 10.0
# Most rows kept (tasks not yet pruned), all principals together: each row is one long call a
# client started within its TTL, so this is far above real use; past it new tasks are refused
# (the call then runs as a plain call) rather than the store growing without bound.
MAX_ROWS = 50_000

TERMINAL = ("completed", "failed", "cancelled")
STATUSES = ("working", "input_required", *TERMINAL)


class TaskStoreError(Exception):
    """The task store is busy or unusable (the sentence says which, and whether a retry
    may help)."""


class TaskStoreFull(TaskStoreError):
    """MAX_ROWS tasks are kept; no new one until some expire."""


def _error(what: str) -> TaskStoreError:
    return TaskStoreError(f"the task store {what}")


SCHEMA = (
    "CREATE TABLE IF NOT EXISTS task ("
    " task_id TEXT PRIMARY KEY, principal TEXT NOT NULL, owner TEXT NOT NULL,"
    " status TEXT NOT NULL, message TEXT, created_at REAL NOT NULL,"
    " updated_at REAL NOT NULL, beat_at REAL NOT NULL, expires_at REAL NOT NULL,"
    " ttl_ms INTEGER NOT NULL, poll_ms INTEGER NOT NULL,"
    " cancel_requested INTEGER NOT NULL DEFAULT 0, input_requests TEXT, responses TEXT,"
    " result TEXT, error TEXT)",
    "CREATE INDEX IF NOT EXISTS task_expires ON task(expires_at)",
)

_COLUMNS = (
    "task_id, principal, owner, status, message, created_at, updated_at, beat_at, ttl_ms,"
    " poll_ms, cancel_requested, input_requests, result, error"
)
_OPEN = "status IN ('working', 'input_required')"


@dataclass(frozen=True)
class TaskRow:
    """One task as stored (JSON columns decoded)."""

    task_id: str
    principal: str
    owner: str
    status: str
    message: str | None
    created_at: float
    updated_at: float
    beat_at: float
    ttl_ms: int
    poll_ms: int
    cancel_requested: bool
    input_requests: dict[str, Any] | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _row(raw: Any) -> TaskRow:
    return TaskRow(
        task_id=raw[0],
        principal=raw[1],
        owner=raw[2],
        status=raw[3],
        message=raw[4],
        created_at=float(raw[5]),
        updated_at=float(raw[6]),
        beat_at=float(raw[7]),
        ttl_ms=int(raw[8]),
        poll_ms=int(raw[9]),
        cancel_requested=bool(raw[10]),
        input_requests=_load(raw[11]),
        result=_load(raw[12]),
        error=_load(raw[13]),
    )


class SQLTaskStore:
    """The task store over a :class:`~fsnotes.state.database.Database` (see the module).

    ``stale_after``: seconds without a beat after which a task not yet ended reads as
    failed (its owner beats far more often; see :mod:`fsnotes.runtime.tasks`).
    ``lost``: the error a task that went stale is ended with (a JSON-RPC error object).
    """

    def __init__(
        self,
        db: Database,
        *,
        clock: Callable[[], float],
        stale_after: float,
        lost: dict[str, Any],
    ) -> None:
        self._db = db
        self._clock = clock
        self.stale_after = stale_after
        self._lost = _dump(lost)
        db.create(SCHEMA)

    @property
    def where(self) -> str:
        return self._db.where

    # --- the owner's writes --------------------------------------------------------------

    def create(
        self,
        task_id: str,
        principal: str,
        owner: str,
        *,
        ttl_ms: int,
        poll_ms: int,
        message: str | None = None,
    ) -> TaskRow:
        """A new task, ``working``, run by ``owner``, its status message ``message``;
        committed when this returns (a ``tasks/get`` from any instance sees it).
        TaskStoreFull past MAX_ROWS."""
        now = self._clock()
        with self._db.transaction() as db:
            db.execute("DELETE FROM task WHERE expires_at <= ?", (now,))
            (count,) = db.execute("SELECT COUNT(*) FROM task").fetchone()
            if count >= MAX_ROWS:
                raise TaskStoreFull(
                    f"the task store holds {MAX_ROWS} tasks; new ones wait until some expire"
                )
            db.execute(
                "INSERT INTO task(task_id, principal, owner, status, message, created_at,"
                " updated_at, beat_at, expires_at, ttl_ms, poll_ms)"
                " VALUES (?, ?, ?, 'working', ?, ?, ?, ?, ?, ?, ?)",
                (
                    task_id,
                    principal,
                    owner,
                    message,
                    now,
                    now,
                    now,
                    now + ttl_ms / 1000,
                    ttl_ms,
                    poll_ms,
                ),
            )
            row = self._select(db, task_id)
        assert row is not None
        return row

    def beat(self, task_id: str, owner: str, message: str | None) -> TaskRow | None:
        """The owner is alive (and its status message is ``message``): the row as it now is
        (whether a cancel was asked, answers that arrived); ``None`` once it is gone."""
        now = self._clock()
        with self._db.transaction(durable=False) as db:
            # A task still running is never pruned under its owner: each beat moves its
            # expiry to a TTL from now.
            db.execute(
                "UPDATE task SET beat_at = ?, expires_at = ? + ttl_ms / 1000.0"
                f" WHERE task_id = ? AND owner = ? AND {_OPEN}",
                (now, now, task_id, owner),
            )
            if message is not None:
                db.execute(
                    "UPDATE task SET message = ?, updated_at = ? WHERE task_id = ? AND owner = ?"
                    f" AND {_OPEN} AND (message IS NULL OR message <> ?)",
                    (message, now, task_id, owner, message),
                )
            return self._select(db, task_id)

    def park(self, task_id: str, owner: str, requests: dict[str, Any]) -> bool:
        """The task waits for the client's answers to ``requests`` (``input_required``);
        False if it ended meanwhile (cancelled, or read as lost)."""
        now = self._clock()
        with self._db.transaction() as db:
            changed = db.execute(
                "UPDATE task SET status = 'input_required', input_requests = ?, responses ="
                " NULL, updated_at = ?, beat_at = ?, expires_at = ? + ttl_ms / 1000.0"
                f" WHERE task_id = ? AND owner = ? AND {_OPEN}",
                (_dump(requests), now, now, now, task_id, owner),
            ).rowcount
        return changed == 1

    def take_answers(self, task_id: str, owner: str) -> dict[str, Any] | None:
        """The answers, once every pending input request has one (the task is then
        ``working`` again); ``None`` while some are still unanswered."""
        with self._db.transaction() as db:
            raw = db.execute(
                "SELECT responses FROM task WHERE task_id = ? AND owner = ? AND"
                " status = 'working' AND input_requests IS NULL AND responses IS NOT NULL",
                (task_id, owner),
            ).fetchone()
            if raw is None:
                return None
            db.execute("UPDATE task SET responses = NULL WHERE task_id = ?", (task_id,))
        answers = _load(raw[0])
        return answers if isinstance(answers, dict) else {}

    def finish(
        self,
        task_id: str,
        owner: str,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """End the task (``completed`` with ``result``, ``failed`` with ``error``, or
        ``cancelled``); False if it had ended already (then nothing changes)."""
        if status not in TERMINAL:
            raise ValueError(f"not a terminal status: {status!r}")
        now = self._clock()
        with self._db.transaction() as db:
            changed = db.execute(
                "UPDATE task SET status = ?, result = ?, error = ?, input_requests = NULL,"
                " responses = NULL, updated_at = ?, expires_at = ? + ttl_ms / 1000.0"
                f" WHERE task_id = ? AND owner = ? AND {_OPEN}",
                (status, _dump(result), _dump(error), now, now, task_id, owner),
            ).rowcount
        return changed == 1

    # --- any instance, for the principal ---------------------------------------------------

    def get(self, task_id: str, principal: str) -> TaskRow | None:
        """The task as the client sees it, or ``None`` (no such task, expired, or another
        principal's: alike). A task whose owner stopped beating is ended as failed first."""
        now = self._clock()
        with self._db.transaction() as db:
            row = self._select(db, task_id)
            if row is None or row.principal != principal:
                return None
            if not row.ended and row.beat_at < now - self.stale_after:
                db.execute(
                    "UPDATE task SET status = 'failed', error = ?, input_requests = NULL,"
                    " responses = NULL, updated_at = ?, expires_at = ? + ttl_ms / 1000.0"
                    f" WHERE task_id = ? AND beat_at < ? AND {_OPEN}",
                    (self._lost, now, now, task_id, now - self.stale_after),
                )
                row = self._select(db, task_id)
        return row

    def answer(self, task_id: str, principal: str, responses: dict[str, Any]) -> TaskRow | None:
        """``tasks/update``: keep the answers to pending input requests (unknown or already
        answered keys are ignored); when none is left pending the task is ``working`` again.
        ``None`` for an unknown task (or another principal's)."""
        now = self._clock()
        with self._db.transaction() as db:
            row = self._select(db, task_id)
            if row is None or row.principal != principal:
                return None
            if row.status != "input_required" or not row.input_requests:
                return row
            pending = dict(row.input_requests)
            raw = db.execute("SELECT responses FROM task WHERE task_id = ?", (task_id,)).fetchone()
            gathered = _load(raw[0]) if raw is not None else None
            answers: dict[str, Any] = gathered if isinstance(gathered, dict) else {}
            for key, value in responses.items():
                if key in pending:
                    answers[key] = value
                    del pending[key]
            db.execute(
                "UPDATE task SET input_requests = ?, responses = ?, status = ?, updated_at = ?"
                " WHERE task_id = ? AND status = 'input_required'",
                (
                    _dump(pending) if pending else None,
                    _dump(answers),
                    "input_required" if pending else "working",
                    now,
                    task_id,
                ),
            )
            return self._select(db, task_id)

    def request_cancel(self, task_id: str, principal: str) -> TaskRow | None:
        """``tasks/cancel``: ask the owner to stop (it ends the task as ``cancelled`` at its
        next check); an ended task is left as it is. ``None`` for an unknown task."""
        with self._db.transaction() as db:
            row = self._select(db, task_id)
            if row is None or row.principal != principal:
                return None
            db.execute(
                f"UPDATE task SET cancel_requested = 1 WHERE task_id = ? AND {_OPEN}", (task_id,)
            )
            return self._select(db, task_id)

    def prune(self) -> int:
        """Drop the rows past their TTL; returns how many."""
        with self._db.reading() as db:
            return int(
                db.execute("DELETE FROM task WHERE expires_at <= ?", (self._clock(),)).rowcount
            )

    def _select(self, db: SQL, task_id: str) -> TaskRow | None:
        raw = db.execute(
            f"SELECT {_COLUMNS} FROM task WHERE task_id = ? AND expires_at > ?",
            (task_id, self._clock()),
        ).fetchone()
        return None if raw is None else _row(raw)


def open_tasks(
    state: SharedState,
    *,
    clock: Callable[[], float],
    stale_after: float,
    lost: dict[str, Any],
) -> SQLTaskStore:
    """The task store of this backend; TaskStoreError if it is busy or unusable."""
    return SQLTaskStore(
        state.database("tasks", timeout=LOCK_TIMEOUT_S, error=_error),
        clock=clock,
        stale_after=stale_after,
        lost=lost,
    )
