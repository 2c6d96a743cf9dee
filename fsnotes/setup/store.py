"""Pending setups, run-time grants and code-attempt limits: ``<state dir>/setup.sqlite3``, or
the shared PostgreSQL database (:mod:`fsnotes.state.shared`).

A setup is one request to widen one principal's scope: a folder and an access level. It is
created by ``notes_setup`` and decided by a person on the setup page (or by ``fsnotes grant``
at a terminal). Everything that decides is one serialised transaction (``BEGIN IMMEDIATE`` on
SQLite, an advisory lock on PostgreSQL), so processes sharing the store agree:

- a page form is usable once: its CSRF token is consumed by the submit that carries it,
  whatever the outcome;
- a wrong setup code is counted against the setup (:data:`MAX_CODE_ATTEMPTS`, then the setup
  is locked) and against the whole state directory (:data:`GLOBAL_FAILURES_MAX` per
  :data:`GLOBAL_FAILURES_WINDOW_S`, then every code check is refused until the window
  passes), so guessing is bounded even across many setups;
- approval records the decision and stores the grant in the same transaction; a refusal,
  an expiry, a lock or a cancellation stores no grant.

Grants stored here are bound to a principal and an absolute folder path. They add to the
configured grants and never lower them; whether a path may be granted at all is the
caller's check (the allowlist in :mod:`fsnotes.setup.policy`), repeated at approval time.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fsnotes.security.grants import Access
from fsnotes.state.audit import Auditor, AuditUnavailable, Entry, Ticket
from fsnotes.state.database import SQL, ChangeFeed, Database
from fsnotes.state.shared import SharedState
from fsnotes.state.sqlite import LocalDB

DB_NAME = "setup.sqlite3"
# A writer holding the lock longer than this is stuck; callers get SetupStoreBusy.
LOCK_TIMEOUT_S = 5.0
# Wrong codes allowed per setup before it is locked (a new setup must be started). With a
# 16-character code from a 32-letter alphabet (80 bits), guessing within these is hopeless;
# the limit is about noticing, not about entropy.
MAX_CODE_ATTEMPTS = 5
# Wrong codes allowed per state directory per window, whichever setups they target: a model
# could start many setups, each with its own per-setup budget.
GLOBAL_FAILURES_MAX = 20
GLOBAL_FAILURES_WINDOW_S = 600.0
# Pending setups one principal may hold at once; more is a model looping, not a person.
MAX_PENDING_PER_PRINCIPAL = 5
# A page form stays submittable this long after it was shown.
CSRF_LIFETIME_S = 900.0
SETUP_ID_BYTES = 18  # 144 random bits: an opaque, unguessable name (it is not a secret)
CSRF_BYTES = 32
# Decided and expired setups are kept this long for their status page, then pruned.
KEEP_DECIDED_S = 24 * 3600.0
# The change feed's channel: every transaction that changes a stored grant notifies it.
GRANTS_CHANNEL = "fsnotes_grants"


class SetupStatus(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"  # refused on the page
    CANCELLED = "cancelled"  # declined or dismissed in the host
    EXPIRED = "expired"
    LOCKED = "locked"  # too many wrong codes


class SetupStoreBusy(Exception):
    """The database stayed locked by another process, or is unusable (the message says
    which, and whether a retry may help)."""


class TooManyPending(Exception):
    """The principal already has :data:`MAX_PENDING_PER_PRINCIPAL` pending setups."""


@dataclass(frozen=True)
class Setup:
    id: str
    principal: str
    path: str  # absolute, normalised host path of the folder
    access: Access
    created: float
    expires: float
    status: SetupStatus
    decided: float | None
    attempts: int  # wrong codes so far
    # What the MCP client said about itself (clientInfo), for the page; self-asserted.
    client: str | None = None

    @property
    def attempts_left(self) -> int:
        return max(0, MAX_CODE_ATTEMPTS - self.attempts)


@dataclass(frozen=True)
class StoredGrant:
    principal: str
    path: str
    access: Access
    granted: float
    source: str  # "page" or "cli"


class Verdict(enum.Enum):
    """What a page submit did."""

    APPROVED = "approved"
    DENIED = "denied"
    WRONG_CODE = "wrong_code"  # nothing stored but the failure count
    LOCKED = "locked"  # this submit used the last attempt, or the setup was locked already
    RATE_LIMITED = "rate_limited"  # too many wrong codes in this state directory lately
    BAD_FORM = "bad_form"  # missing, unknown, used or expired CSRF token
    NOT_PENDING = "not_pending"  # unknown, expired or already decided
    NOT_GRANTABLE = "not_grantable"  # the policy no longer allows it (checked again now)


@dataclass(frozen=True)
class SubmitResult:
    verdict: Verdict
    setup: Setup | None


def _error(what: str) -> SetupStoreBusy:
    return SetupStoreBusy(f"the setup database {what}")


SCHEMA = (
    "CREATE TABLE IF NOT EXISTS setup ("
    " id TEXT PRIMARY KEY, principal TEXT NOT NULL, path TEXT NOT NULL,"
    " access INTEGER NOT NULL, created REAL NOT NULL, expires REAL NOT NULL,"
    " status TEXT NOT NULL, decided REAL, attempts INTEGER NOT NULL DEFAULT 0, client TEXT)",
    "CREATE INDEX IF NOT EXISTS setup_status ON setup(status, expires)",
    "CREATE TABLE IF NOT EXISTS csrf ("
    " token_hash TEXT PRIMARY KEY, setup_id TEXT NOT NULL, expires REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS code_failure (at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS grant_ ("
    " principal TEXT NOT NULL, path TEXT NOT NULL, access INTEGER NOT NULL,"
    " granted REAL NOT NULL, source TEXT NOT NULL, setup_id TEXT,"
    " PRIMARY KEY (principal, path))",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO meta(key, value) VALUES ('generation', 0) ON CONFLICT DO NOTHING",
)


def _hash(token: str) -> str:
    # Tokens are stored hashed: a copy of the database does not yield usable forms.
    return hashlib.sha256(token.encode()).hexdigest()


class SetupStore:
    """The setup database, safe to share between threads, processes and instances.

    ``where``: a state directory (its ``setup.sqlite3``) or a shared
    :class:`~fsnotes.state.database.Database`. ``audit``: where grants and revocations
    are recorded (intent before the transaction that grants, outcome after it); without
    one nothing is recorded (unit tests of the store alone).
    """

    def __init__(
        self,
        where: Path | Database,
        *,
        clock: Callable[[], float],
        audit: Auditor | None = None,
    ) -> None:
        """Open (creating if needed) the database; SetupStoreBusy if busy or unusable."""
        if isinstance(where, Path):
            where = LocalDB(where / DB_NAME, timeout=LOCK_TIMEOUT_S, error=_error)
        self._db = where
        self._clock = clock
        self._audit = audit
        self._db.create(SCHEMA)

    @property
    def where(self) -> str:
        return self._db.where

    # --- plumbing ------------------------------------------------------------------------

    def _read(self) -> contextlib.AbstractContextManager[SQL]:
        return self._db.reading()

    def _tx(self) -> contextlib.AbstractContextManager[SQL]:
        return self._db.immediate()

    def _expire(self, db: SQL, now: float) -> None:
        db.execute(
            "UPDATE setup SET status = ?, decided = expires WHERE status = ? AND expires <= ?",
            (SetupStatus.EXPIRED, SetupStatus.PENDING, now),
        )

    @staticmethod
    def _row(row: tuple[object, ...] | None) -> Setup | None:
        if row is None:
            return None
        sid, principal, path, access, created, expires, status, decided, attempts, client = row
        return Setup(
            id=str(sid),
            principal=str(principal),
            path=str(path),
            access=Access(int(str(access))),
            created=float(str(created)),
            expires=float(str(expires)),
            status=SetupStatus(str(status)),
            decided=None if decided is None else float(str(decided)),
            attempts=int(str(attempts)),
            client=None if client is None else str(client),
        )

    _COLUMNS = "id, principal, path, access, created, expires, status, decided, attempts, client"

    def _get(self, db: SQL, setup_id: str) -> Setup | None:
        row = db.execute(f"SELECT {self._COLUMNS} FROM setup WHERE id = ?", (setup_id,)).fetchone()
        return self._row(row)

    def _bump(self, db: SQL) -> None:
        db.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
        self._db.notify(db, GRANTS_CHANNEL)

    def _upsert_grant(
        self,
        db: SQL,
        principal: str,
        path: str,
        access: Access,
        source: str,
        setup_id: str | None,
        *,
        raise_only: bool,
    ) -> None:
        row = db.execute(
            "SELECT access FROM grant_ WHERE principal = ? AND path = ?", (principal, path)
        ).fetchone()
        if row is not None and raise_only and int(row[0]) >= access:
            return
        db.execute(
            "INSERT INTO grant_(principal, path, access, granted, source, setup_id) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(principal, path) DO UPDATE SET "
            "access = excluded.access, granted = excluded.granted, source = excluded.source, "
            "setup_id = excluded.setup_id",
            (principal, path, int(access), self._clock(), source, setup_id),
        )
        self._bump(db)

    # --- setups --------------------------------------------------------------------------

    def start(
        self,
        principal: str,
        path: str,
        access: Access,
        *,
        lifetime: float,
        client: str | None = None,
    ) -> Setup:
        """A pending setup for this principal, folder and access: the existing one if there is
        one (a retried tool call must not multiply them), else a new one."""
        now = self._clock()
        with self._tx() as db:
            self._expire(db, now)
            row = db.execute(
                f"SELECT {self._COLUMNS} FROM setup WHERE principal = ? AND path = ? AND "
                "access = ? AND status = ? ORDER BY created DESC LIMIT 1",
                (principal, path, int(access), SetupStatus.PENDING),
            ).fetchone()
            if row is not None:
                found = self._row(row)
                assert found is not None
                return found
            (pending,) = db.execute(
                "SELECT COUNT(*) FROM setup WHERE principal = ? AND status = ?",
                (principal, SetupStatus.PENDING),
            ).fetchone()
            if pending >= MAX_PENDING_PER_PRINCIPAL:
                raise TooManyPending(
                    f"{pending} setups are already waiting for a person; finish or let them "
                    "expire first"
                )
            db.execute(
                "DELETE FROM setup WHERE status != ? AND decided < ?",
                (SetupStatus.PENDING, now - KEEP_DECIDED_S),
            )
            setup = Setup(
                id=secrets.token_urlsafe(SETUP_ID_BYTES),
                principal=principal,
                path=path,
                access=access,
                created=now,
                expires=now + lifetime,
                status=SetupStatus.PENDING,
                decided=None,
                attempts=0,
                client=client,
            )
            db.execute(
                f"INSERT INTO setup({self._COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    setup.id,
                    principal,
                    path,
                    int(access),
                    now,
                    setup.expires,
                    SetupStatus.PENDING,
                    None,
                    0,
                    client,
                ),
            )
            return setup

    def get(self, setup_id: str) -> Setup | None:
        """The setup (with an elapsed pending one reported as expired), or ``None``."""
        with self._read() as db:
            setup = self._get(db, setup_id)
        if (
            setup is not None
            and setup.status is SetupStatus.PENDING
            and setup.expires <= self._clock()
        ):
            with self._tx() as db:
                self._expire(db, self._clock())
                setup = self._get(db, setup_id)
        return setup

    def pending_count(self) -> int:
        with self._read() as db:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM setup WHERE status = ? AND expires > ?",
                (SetupStatus.PENDING, self._clock()),
            ).fetchone()
        return int(count)

    def cancel(self, setup_id: str, principal: str) -> Setup | None:
        """The person declined or dismissed it in the host: a pending setup of this principal
        becomes cancelled (its page then refuses). Returns the setup as it now stands."""
        now = self._clock()
        with self._tx() as db:
            self._expire(db, now)
            db.execute(
                "UPDATE setup SET status = ?, decided = ? WHERE id = ? AND principal = ? "
                "AND status = ?",
                (SetupStatus.CANCELLED, now, setup_id, principal, SetupStatus.PENDING),
            )
            return self._get(db, setup_id)

    # --- the page ------------------------------------------------------------------------

    def issue_form_token(self, setup_id: str) -> str | None:
        """A one-use CSRF token for a form about a pending setup (``None`` if not pending)."""
        now = self._clock()
        token = secrets.token_urlsafe(CSRF_BYTES)
        with self._tx() as db:
            self._expire(db, now)
            setup = self._get(db, setup_id)
            if setup is None or setup.status is not SetupStatus.PENDING:
                return None
            db.execute("DELETE FROM csrf WHERE expires <= ?", (now,))
            db.execute(
                "INSERT INTO csrf(token_hash, setup_id, expires) VALUES (?, ?, ?)",
                (_hash(token), setup_id, min(now + CSRF_LIFETIME_S, setup.expires)),
            )
        return token

    def submit(
        self,
        setup_id: str,
        form_token: str,
        *,
        approve: bool,
        code_ok: Callable[[], bool],
        grantable: Callable[[Setup], bool],
    ) -> SubmitResult:
        """Decide a setup from the page, atomically.

        ``code_ok`` is asked only for an approval, inside the transaction and after the form
        token was consumed and the rate limits checked; ``grantable`` re-checks the policy
        before anything is granted. A denial needs a valid form but no code (refusing access
        is never dangerous; a cross-site page still cannot forge it without the token).

        An approval's audit row is written inside the transaction, just before the grant (the
        intent; when it cannot be written, nothing is granted and SetupStoreBusy says why),
        and completed after the commit.
        """
        tickets: list[Ticket] = []
        try:
            result = self._submit(setup_id, form_token, approve, code_ok, grantable, tickets)
        except BaseException as exc:
            for ticket in tickets:
                self._finish(ticket, exc)
            raise
        for ticket in tickets:
            self._finish(ticket)
        return result

    def _submit(
        self,
        setup_id: str,
        form_token: str,
        approve: bool,
        code_ok: Callable[[], bool],
        grantable: Callable[[Setup], bool],
        tickets: list[Ticket],
    ) -> SubmitResult:
        now = self._clock()
        with self._tx() as db:
            self._expire(db, now)
            consumed = db.execute(
                "DELETE FROM csrf WHERE token_hash = ? AND setup_id = ? AND expires > ?",
                (_hash(form_token), setup_id, now),
            ).rowcount
            setup = self._get(db, setup_id)
            if setup is None or setup.status is not SetupStatus.PENDING:
                verdict = Verdict.LOCKED if setup and setup.status is SetupStatus.LOCKED else None
                return SubmitResult(verdict or Verdict.NOT_PENDING, setup)
            if consumed != 1:
                return SubmitResult(Verdict.BAD_FORM, setup)
            if not approve:
                db.execute(
                    "UPDATE setup SET status = ?, decided = ? WHERE id = ?",
                    (SetupStatus.DENIED, now, setup_id),
                )
                return SubmitResult(Verdict.DENIED, self._get(db, setup_id))
            db.execute("DELETE FROM code_failure WHERE at <= ?", (now - GLOBAL_FAILURES_WINDOW_S,))
            (recent,) = db.execute("SELECT COUNT(*) FROM code_failure").fetchone()
            if recent >= GLOBAL_FAILURES_MAX:
                return SubmitResult(Verdict.RATE_LIMITED, setup)
            if not code_ok():
                db.execute("INSERT INTO code_failure(at) VALUES (?)", (now,))
                attempts = setup.attempts + 1
                locked = attempts >= MAX_CODE_ATTEMPTS
                db.execute(
                    "UPDATE setup SET attempts = ?, status = ?, decided = ? WHERE id = ?",
                    (
                        attempts,
                        SetupStatus.LOCKED if locked else SetupStatus.PENDING,
                        now if locked else None,
                        setup_id,
                    ),
                )
                return SubmitResult(
                    Verdict.LOCKED if locked else Verdict.WRONG_CODE, self._get(db, setup_id)
                )
            if not grantable(setup):
                return SubmitResult(Verdict.NOT_GRANTABLE, setup)
            ticket = self._begin(
                setup.principal, "grant", "notes_setup", setup.path, setup.access, "setup page"
            )
            if ticket is not None:
                tickets.append(ticket)
            db.execute(
                "UPDATE setup SET status = ?, decided = ? WHERE id = ?",
                (SetupStatus.APPROVED, now, setup_id),
            )
            self._upsert_grant(
                db, setup.principal, setup.path, setup.access, "page", setup_id, raise_only=True
            )
            return SubmitResult(Verdict.APPROVED, self._get(db, setup_id))

    # --- grants --------------------------------------------------------------------------

    def grant(self, principal: str, path: str, access: Access, *, source: str = "cli") -> None:
        """Set this principal's stored grant on ``path`` to exactly ``access`` (a terminal
        operator may lower it too). Pending setups this grant satisfies are approved."""
        ticket = self._begin(principal, "grant", "fsnotes grant", path, access, "terminal")
        try:
            now = self._clock()
            with self._tx() as db:
                self._upsert_grant(db, principal, path, access, source, None, raise_only=False)
                db.execute(
                    "UPDATE setup SET status = ?, decided = ? WHERE principal = ? AND path = ? "
                    "AND access <= ? AND status = ? AND expires > ?",
                    (
                        SetupStatus.APPROVED,
                        now,
                        principal,
                        path,
                        int(access),
                        SetupStatus.PENDING,
                        now,
                    ),
                )
        except BaseException as exc:
            self._finish(ticket, exc)
            raise
        self._finish(ticket)

    def revoke(self, principal: str, path: str) -> bool:
        """Remove this principal's stored grant on ``path``; whether there was one."""
        ticket = self._begin(principal, "revoke", "fsnotes grant --revoke", path, None, "terminal")
        try:
            with self._tx() as db:
                gone = db.execute(
                    "DELETE FROM grant_ WHERE principal = ? AND path = ?", (principal, path)
                ).rowcount
                if gone:
                    self._bump(db)
        except BaseException as exc:
            self._finish(ticket, exc)
            raise
        if not gone and ticket is not None:
            ticket.failed("no stored grant: nothing changed")
        self._finish(ticket)
        return bool(gone)

    # --- audit ---------------------------------------------------------------------------

    def _begin(
        self,
        principal: str,
        action: str,
        tool: str,
        path: str,
        access: Access | None,
        confirmed_by: str,
    ) -> Ticket | None:
        """The audit log's intent for a grant change (None without an audit log)."""
        if self._audit is None:
            return None
        entry = Entry(
            principal=principal,
            action=action,
            tool=tool,
            workspace=path,
            confirmed_by=confirmed_by,
            detail=None if access is None else f"access {access.label}",
        )
        try:
            return self._audit.begin(entry)
        except AuditUnavailable as exc:
            raise SetupStoreBusy(f"{exc}, so nothing was granted or revoked") from None

    def _finish(self, ticket: Ticket | None, error: BaseException | None = None) -> None:
        if ticket is not None and self._audit is not None:
            self._audit.finish(ticket, error)

    def grants(self, principal: str | None = None) -> list[StoredGrant]:
        sql = "SELECT principal, path, access, granted, source FROM grant_"
        args: tuple[str, ...] = ()
        if principal is not None:
            sql += " WHERE principal = ?"
            args = (principal,)
        with self._read() as db:
            rows = db.execute(sql + " ORDER BY path, principal", args).fetchall()
        return [
            StoredGrant(str(p), str(d), Access(int(a)), float(t), str(s)) for p, d, a, t, s in rows
        ]

    def watch(self, on_change: Callable[[], bool]) -> ChangeFeed | None:
        """Call ``on_change`` (in a thread of its own) soon after a stored grant changes in
        any process, or ``None`` when the backend has no change feed (SQLite: reading
        :meth:`generation` is a local read that never waits). See
        :meth:`~fsnotes.state.database.Database.watch`."""
        return self._db.watch(GRANTS_CHANNEL, on_change)

    def generation(self) -> int:
        """A number that changes whenever a stored grant changes (in any process)."""
        with self._read() as db:
            (value,) = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(value)


def open_setup_store(
    state: SharedState, *, clock: Callable[[], float], audit: Auditor | None
) -> SetupStore:
    """The setup store of this backend; SetupStoreBusy if it is busy or unusable."""
    db = state.database("setup", timeout=LOCK_TIMEOUT_S, error=_error)
    return SetupStore(db, clock=clock, audit=audit)
