"""The audit log: who changed which note or grant, when, from which instance; never content.

Every mutation (create, update, move, delete, grant, revoke) is a row in the shared store
(``audit.sqlite3`` in the state directory, or the ``audit`` table of the PostgreSQL
database): its time, the principal it was done for, the tool (or command), the workspace,
the note's path (and its new path for a move), its etag before and after, who confirmed it
(a delete: the principal who answered the question; a grant: the setup page or a terminal),
the instance that did it, and the outcome.

Written in two steps, so that no mutation happens unrecorded:

1. **Intent, before the mutation.** If this row cannot be written, the mutation is not
   attempted: the call fails with "nothing was changed; try again shortly"
   (:class:`AuditUnavailable`). For a delete this comes before the confirmation is claimed,
   so the confirmation stays usable.
2. **Outcome, after it**: ``done`` or ``failed`` (with the reason's kind), the etags and the
   new path. If this write fails, the mutation stands (failing the call would tell the
   client that nothing happened, which is false); a WARNING is logged and the row keeps the
   outcome ``pending``, which ``fsnotes audit`` shows as "outcome not recorded": the entry
   says that the change was about to happen and may have happened.

A process killed between the two leaves ``pending`` rows too. The log is append-only for
fsnotes (nothing here updates a row but its own outcome, nothing deletes); it is the
operator's to archive or trim.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsnotes.state.database import Database
from fsnotes.state.sqlite import LocalDB

if TYPE_CHECKING:
    from fsnotes.state.shared import SharedState

log = logging.getLogger("fsnotes.audit")

DB_NAME = "audit.sqlite3"
# An audit row is one short insert; a writer holding SQLite's lock longer is stuck.
LOCK_TIMEOUT_S = 5.0
# The reason of a failed mutation is kept short: its kind and first words, never a note's
# content (the exceptions that reach here carry paths and sentences, not content).
MAX_DETAIL_CHARS = 200
# Outcomes of a row: written as "pending" (the intent), then "done" or "failed".
PENDING, DONE, FAILED = "pending", "done", "failed"
ACTIONS = ("create", "update", "move", "delete", "grant", "revoke")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS audit ("
    " id INTEGER PRIMARY KEY, at REAL NOT NULL, finished REAL,"
    " principal TEXT NOT NULL, action TEXT NOT NULL, tool TEXT NOT NULL,"
    " workspace TEXT NOT NULL, path TEXT, path_after TEXT,"
    " etag_before TEXT, etag_after TEXT, confirmed_by TEXT,"
    " outcome TEXT NOT NULL, detail TEXT, instance TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS audit_at ON audit(at)",
    "CREATE INDEX IF NOT EXISTS audit_principal ON audit(principal, at)",
)
_COLUMNS = (
    "id, at, finished, principal, action, tool, workspace, path, path_after, etag_before, "
    "etag_after, confirmed_by, outcome, detail, instance"
)


class AuditUnavailable(Exception):
    """The audit log cannot be written or read; the message says whether to retry."""


def _error(what: str) -> AuditUnavailable:
    return AuditUnavailable(f"the audit log {what}")


def default_instance() -> str:
    """This process as the audit log names it when no instance name is configured."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Entry:
    """What a mutation is about to do (the intent)."""

    principal: str
    action: str  # one of ACTIONS
    tool: str  # the MCP tool, or the command ("fsnotes grant")
    workspace: str  # the workspace's name; for a grant, the folder's path
    path: str | None = None  # the note's path in the workspace, '/'-joined
    etag_before: str | None = None
    confirmed_by: str | None = None
    detail: str | None = None  # e.g. the access level of a grant


@dataclass(frozen=True)
class Record:
    """One row as ``fsnotes audit`` shows it."""

    id: int
    at: float
    finished: float | None
    principal: str
    action: str
    tool: str
    workspace: str
    path: str | None
    path_after: str | None
    etag_before: str | None
    etag_after: str | None
    confirmed_by: str | None
    outcome: str
    detail: str | None
    instance: str

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["time"] = _iso(self.at)
        out["finishedTime"] = None if self.finished is None else _iso(self.finished)
        return out


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class AuditLog:
    """The audit table of one backend."""

    def __init__(self, db: Database, *, clock: Callable[[], float], create: bool = True) -> None:
        """Open (creating if needed) the log; AuditUnavailable if it cannot be used.

        ``create=False`` (a reader such as ``fsnotes audit``): nothing is created, not the
        SQLite file, not the table; a log that does not exist yet reads as no rows."""
        self._db = db
        self._clock = clock
        self._created = create
        if create:
            db.create(SCHEMA)

    @property
    def where(self) -> str:
        return self._db.where

    def intent(self, entry: Entry, instance: str) -> int:
        """Record that ``entry`` is about to happen; its row id. AuditUnavailable if not.

        One statement that commits on its own (durably) before this returns."""
        with self._db.reading() as db:
            rows = db.execute(
                "INSERT INTO audit(at, principal, action, tool, workspace, path, etag_before, "
                "confirmed_by, outcome, detail, instance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "RETURNING id",
                (
                    self._clock(),
                    entry.principal,
                    entry.action,
                    entry.tool,
                    entry.workspace,
                    entry.path,
                    entry.etag_before,
                    entry.confirmed_by,
                    PENDING,
                    entry.detail,
                    instance,
                ),
            ).fetchall()
        return int(rows[0][0])

    def outcome(
        self,
        row: int,
        outcome: str,
        *,
        path_after: str | None,
        etag_before: str | None,
        etag_after: str | None,
        detail: str | None,
    ) -> None:
        """Complete row ``row`` (only a pending one: an outcome is written once).

        Not synced to disk before it returns (the intent was): a crash just after may
        lose the outcome, and the row then says ``pending``, which is what it means. With
        the intent as one statement, this takes what the audit log adds to a mutation from
        about 7 ms to 2-4 ms with SQLite, and from 8 ms to 5 ms with PostgreSQL (p50, the
        2-core machine's disk, fsync on)."""
        with self._db.transaction(durable=False) as db:
            db.execute(
                "UPDATE audit SET outcome = ?, finished = ?, path_after = ?, "
                "etag_before = COALESCE(?, etag_before), etag_after = ?, "
                "detail = COALESCE(?, detail) WHERE id = ? AND outcome = ?",
                (
                    outcome,
                    self._clock(),
                    path_after,
                    etag_before,
                    etag_after,
                    detail,
                    row,
                    PENDING,
                ),
            )

    def read(self, *, since: float | None = None, principal: str | None = None) -> list[Record]:
        """The rows at or after ``since`` (Unix time), of ``principal``, oldest first."""
        if not self._created and not self._exists():
            return []
        where: list[str] = []
        args: list[float | str] = []
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        if principal is not None:
            where.append("principal = ?")
            args.append(principal)
        sql = f"SELECT {_COLUMNS} FROM audit"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._db.reading() as db:
            rows = db.execute(sql + " ORDER BY at, id", args).fetchall()
        return [_record(row) for row in rows]

    def _exists(self) -> bool:
        """Is there an audit table to read (asked without creating one)?"""
        if isinstance(self._db, LocalDB) and not self._db.path.exists():
            return False  # connecting would create the file
        if self._db.dialect == "sqlite":
            sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit'"
        else:  # the connection's search_path is fsnotes' schema (state/postgres.py)
            sql = "SELECT 1 WHERE to_regclass('audit') IS NOT NULL"
        with self._db.reading() as db:
            return db.execute(sql).fetchone() is not None


def _record(row: Any) -> Record:
    (rid, at, finished, principal, action, tool, workspace, path, path_after) = row[:9]
    (etag_before, etag_after, confirmed_by, outcome, detail, instance) = row[9:]
    return Record(
        id=int(rid),
        at=float(at),
        finished=None if finished is None else float(finished),
        principal=str(principal),
        action=str(action),
        tool=str(tool),
        workspace=str(workspace),
        path=path,
        path_after=path_after,
        etag_before=etag_before,
        etag_after=etag_after,
        confirmed_by=confirmed_by,
        outcome=str(outcome),
        detail=detail,
        instance=str(instance),
    )


@dataclass
class Ticket:
    """One mutation in flight: what its block learns (etags, new path), and its outcome."""

    row: int
    entry: Entry
    etag_before: str | None = None
    etag_after: str | None = None
    path_after: str | None = None
    failure: str | None = None  # set: the outcome is "failed" even if the block returns
    _finished: bool = field(default=False, repr=False)

    def done(self, *, etag_after: str | None = None, path_after: str | None = None) -> None:
        self.etag_after = etag_after
        self.path_after = path_after

    def failed(self, why: str) -> None:
        self.failure = why[:MAX_DETAIL_CHARS]


class Auditor:
    """The hook the mutating code calls: :meth:`record` around each mutation."""

    def __init__(self, log: AuditLog, *, instance: str) -> None:
        self.log = log
        self.instance = instance

    def begin(self, entry: Entry) -> Ticket:
        """Record the intent; AuditUnavailable means nothing may be done."""
        return Ticket(self.log.intent(entry, self.instance), entry, etag_before=entry.etag_before)

    def finish(self, ticket: Ticket, error: BaseException | None = None) -> None:
        """Record the outcome; never raises (see the module: the row stays pending)."""
        if ticket._finished:
            return
        ticket._finished = True
        failure = ticket.failure
        if error is not None and failure is None:
            failure = _why(error)
        try:
            self.log.outcome(
                ticket.row,
                DONE if failure is None else FAILED,
                path_after=ticket.path_after,
                etag_before=ticket.etag_before,
                etag_after=ticket.etag_after if failure is None else None,
                detail=failure,
            )
        except AuditUnavailable as exc:
            log.warning(
                "audit row %d (%s %s by %s) keeps outcome 'pending': %s",
                ticket.row,
                ticket.entry.action,
                ticket.entry.path or ticket.entry.workspace,
                ticket.entry.principal,
                exc,
            )

    @contextlib.contextmanager
    def record(self, entry: Entry) -> Iterator[Ticket]:
        """Intent before the block (AuditUnavailable: the block does not run), outcome after
        it: ``failed`` if it raised or called :meth:`Ticket.failed`, else ``done``."""
        ticket = self.begin(entry)
        try:
            yield ticket
        except BaseException as exc:
            self.finish(ticket, exc)
            raise
        self.finish(ticket)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:MAX_DETAIL_CHARS].rstrip(": ")


def open_audit(state: SharedState, *, clock: Callable[[], float], create: bool = True) -> AuditLog:
    """The audit log of this backend; AuditUnavailable if it cannot be used.
    ``create=False``: to read only (see :class:`AuditLog`)."""
    db = state.database("audit", timeout=LOCK_TIMEOUT_S, error=_error)
    return AuditLog(db, clock=clock, create=create)


def sqlite_audit(state_dir: Path, *, clock: Callable[[], float]) -> AuditLog:
    """The state directory's audit log (tests and the default backend)."""
    return AuditLog(LocalDB(state_dir / DB_NAME, timeout=LOCK_TIMEOUT_S, error=_error), clock=clock)
