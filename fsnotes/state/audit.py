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
operator's to archive or trim (trimming the start breaks the chain there: verify the chain
and keep a checkpoint first).

**Tamper-evident.** Each intent and each outcome takes the next position of one hash chain
shared by every instance (:mod:`fsnotes.state.audit_chain`: what it proves and what it
cannot). The outcome never overwrites what the intent wrote: its etag before and detail go
to columns of their own (``out_etag_before``, ``out_detail``), and :class:`Record` shows the
outcome's when there is one. Both writes take the chain's head row lock, so appends from
all instances are serialised for a few statements each.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsnotes.state.audit_chain import GENESIS, ChainRow, intent_fields, link, outcome_fields
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
    # The chain's head: its last position and hash (audit_chain.py). One row, locked by each
    # append until it commits. ("INTEGER NOT NULL PRIMARY KEY": not an identity column.)
    "CREATE TABLE IF NOT EXISTS audit_head ("
    " one INTEGER NOT NULL PRIMARY KEY CHECK (one = 1),"
    " seq BIGINT NOT NULL, hash TEXT NOT NULL)",
    f"INSERT INTO audit_head(one, seq, hash) VALUES (1, 0, '{GENESIS}') ON CONFLICT DO NOTHING",
)
# The chain's columns, added to a table an older fsnotes made (rows from before have none).
CHAIN_COLUMNS = (
    ("seq", "BIGINT"),
    ("hash", "TEXT"),
    ("out_seq", "BIGINT"),
    ("out_hash", "TEXT"),
    ("out_etag_before", "TEXT"),
    ("out_detail", "TEXT"),
)
_BASE_COLUMNS = (
    "id, at, finished, principal, action, tool, workspace, path, path_after, etag_before, "
    "etag_after, confirmed_by, outcome, detail, instance"
)
# What a Record shows: the outcome's etag before and detail when it wrote them.
_RECORD_COLUMNS = (
    "id, at, finished, principal, action, tool, workspace, path, path_after, "
    "COALESCE(out_etag_before, etag_before), etag_after, confirmed_by, outcome, "
    "COALESCE(out_detail, detail), instance"
)
_CHAIN_SELECT = (
    "id, at, finished, principal, action, tool, workspace, path, path_after, etag_before, "
    "out_etag_before, etag_after, confirmed_by, outcome, detail, out_detail, instance, "
    "seq, hash, out_seq, out_hash"
)
_TAKE_POSITION = "UPDATE audit_head SET seq = seq + 1 WHERE one = 1 RETURNING seq, hash"
_SET_HEAD = "UPDATE audit_head SET hash = ? WHERE one = 1"


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
            self._migrate()

    def _columns(self) -> set[str]:
        """The audit table's columns (none when there is no table), asked without creating."""
        if isinstance(self._db, LocalDB) and not self._db.path.exists():
            return set()  # connecting would create the file
        with self._db.reading() as db:
            if self._db.dialect == "sqlite":
                return {str(r[1]) for r in db.execute("PRAGMA table_info(audit)").fetchall()}
            # The connection's search_path is fsnotes' schema (state/postgres.py).
            rows = db.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'audit'"
            ).fetchall()
            return {str(r[0]) for r in rows}

    def _migrate(self) -> None:
        """Add the chain's columns to a table made before them, one process at a time."""
        if {name for name, _ in CHAIN_COLUMNS} <= self._columns():
            return
        with self._db.immediate() as db:
            if self._db.dialect == "sqlite":
                have = {str(r[1]) for r in db.execute("PRAGMA table_info(audit)").fetchall()}
                for name, kind in CHAIN_COLUMNS:
                    if name not in have:
                        db.execute(f"ALTER TABLE audit ADD COLUMN {name} {kind}")
            else:
                for name, kind in CHAIN_COLUMNS:
                    db.execute(f"ALTER TABLE audit ADD COLUMN IF NOT EXISTS {name} {kind}")

    @property
    def where(self) -> str:
        return self._db.where

    def intent(self, entry: Entry, instance: str) -> int:
        """Record that ``entry`` is about to happen; its row id. AuditUnavailable if not.

        One transaction (the next chain position, the row, the new head) committed durably
        before this returns."""
        at = self._clock()
        with self._db.transaction() as db:
            seq, previous = db.execute(_TAKE_POSITION).fetchone()
            row = ChainRow(
                id=0, at=at, finished=None, principal=entry.principal, action=entry.action,
                tool=entry.tool, workspace=entry.workspace, path=entry.path,
                path_after=None, etag_before=entry.etag_before, out_etag_before=None,
                etag_after=None, confirmed_by=entry.confirmed_by, outcome=PENDING,
                detail=entry.detail, out_detail=None, instance=instance, seq=int(seq),
                hash=None, out_seq=None, out_hash=None,
            )  # fmt: skip
            digest = link(str(previous), int(seq), intent_fields(row))
            rows = db.execute(
                "INSERT INTO audit(at, principal, action, tool, workspace, path, etag_before, "
                "confirmed_by, outcome, detail, instance, seq, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (at, entry.principal, entry.action, entry.tool, entry.workspace, entry.path,
                 entry.etag_before, entry.confirmed_by, PENDING, entry.detail, instance,
                 int(seq), digest),
            ).fetchall()  # fmt: skip
            db.execute(_SET_HEAD, (digest,))
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
        lose the outcome, and the row then says ``pending``, which is what it means. The
        chain stays whole: both backends' logs are sequential, so a later durable commit
        makes this one durable too, and a lost one takes its position with it. With the
        intent as one statement, this took what the audit log adds to a mutation from
        about 7 ms to 2-4 ms with SQLite, and from 8 ms to 5 ms with PostgreSQL (p50, the
        2-core machine's disk, fsync on); benchmarks/bench_audit.py has the chain's cost."""
        finished = self._clock()
        with self._db.transaction(durable=False) as db:
            found = db.execute("SELECT seq, outcome FROM audit WHERE id = ?", (row,)).fetchone()
            if found is None or found[1] != PENDING or found[0] is None:
                return  # an outcome is written once (and never for a row from before)
            seq, previous = db.execute(_TAKE_POSITION).fetchone()
            shown = ChainRow(
                id=row, at=0.0, finished=finished, principal="", action="", tool="",
                workspace="", path=None, path_after=path_after, etag_before=None,
                out_etag_before=etag_before, etag_after=etag_after, confirmed_by=None,
                outcome=outcome, detail=None, out_detail=detail, instance="",
                seq=int(found[0]), hash=None, out_seq=int(seq), out_hash=None,
            )  # fmt: skip
            digest = link(str(previous), int(seq), outcome_fields(shown))
            db.execute(
                "UPDATE audit SET outcome = ?, finished = ?, path_after = ?, "
                "out_etag_before = ?, etag_after = ?, out_detail = ?, out_seq = ?, "
                "out_hash = ? WHERE id = ? AND outcome = ?",
                (outcome, finished, path_after, etag_before, etag_after, detail, int(seq),
                 digest, row, PENDING),
            )  # fmt: skip
            db.execute(_SET_HEAD, (digest,))

    def head(self) -> tuple[int, str]:
        """The chain's last position and hash (0 and the genesis hash when empty)."""
        if not self._created and "seq" not in self._columns():
            return (0, GENESIS)
        with self._db.reading() as db:
            found = db.execute("SELECT seq, hash FROM audit_head WHERE one = 1").fetchone()
        return (0, GENESIS) if found is None else (int(found[0]), str(found[1]))

    def chain_rows(self) -> list[ChainRow]:
        """Every row with its chain columns, by id (for :func:`audit_chain.verify`)."""
        columns = self._columns() if not self._created else None
        if columns is not None and not columns:
            return []
        select = _CHAIN_SELECT
        if columns is not None:  # a table from before the chain, read as it is
            for name, _ in CHAIN_COLUMNS:
                if name not in columns:
                    select = re.sub(rf"\b{name}\b", f"NULL AS {name}", select)
        with self._db.reading() as db:
            rows = db.execute(f"SELECT {select} FROM audit ORDER BY id").fetchall()
        return [_chain_row(r) for r in rows]

    def read(self, *, since: float | None = None, principal: str | None = None) -> list[Record]:
        """The rows at or after ``since`` (Unix time), of ``principal``, oldest first."""
        columns = self._columns() if not self._created else None
        if columns is not None and not columns:
            return []
        record_columns = _RECORD_COLUMNS
        if columns is not None and "out_detail" not in columns:
            record_columns = _BASE_COLUMNS  # a table from before the chain
        where: list[str] = []
        args: list[float | str] = []
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        if principal is not None:
            where.append("principal = ?")
            args.append(principal)
        sql = f"SELECT {record_columns} FROM audit"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._db.reading() as db:
            rows = db.execute(sql + " ORDER BY at, id", args).fetchall()
        return [_record(row) for row in rows]


def _chain_row(row: Any) -> ChainRow:
    def num(v: Any) -> int | None:
        return None if v is None else int(v)

    return ChainRow(
        id=int(row[0]), at=float(row[1]), finished=None if row[2] is None else float(row[2]),
        principal=row[3], action=row[4], tool=row[5], workspace=row[6], path=row[7],
        path_after=row[8], etag_before=row[9], out_etag_before=row[10], etag_after=row[11],
        confirmed_by=row[12], outcome=row[13], detail=row[14], out_detail=row[15],
        instance=row[16], seq=num(row[17]), hash=row[18], out_seq=num(row[19]),
        out_hash=row[20],
    )  # fmt: skip


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
