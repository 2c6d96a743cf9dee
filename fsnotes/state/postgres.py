"""PostgreSQL as the shared store of several fsnotes instances (``[state] database``).

One :class:`Postgres` per process owns a ``psycopg_pool`` connection pool on one DSN; each
store gets a :class:`PgDB` view of it (its own error type, its own advisory-lock key). The
tables live in the schema ``fsnotes`` of that database, so they cannot collide with another
application's.

Guarantees and limits:

- **Never a password in a message or a log line.** :func:`redact` names the database as
  ``postgresql://user@host:port/dbname``; driver messages are scrubbed of the password (and
  of the DSN itself) before they reach anyone.
- **Down or restarting is a retryable error, never a hang or a crash.** Getting a connection
  waits at most :data:`POOL_WAIT_S`, a lock at most :data:`LOCK_WAIT_S`, a statement at most
  :data:`STATEMENT_TIMEOUT_S`; a connection is checked before it is handed out (see
  :func:`_check`), so the first request after a restart does not fail on a connection the
  restart ended. Every such
  failure is the store's exception saying "try again shortly"; the pool reconnects by
  itself (attempts back off from 1 s up to :data:`RECONNECT_S`, and the next request starts
  a fresh round after that).
- **A stuck instance cannot hold a lock for ever.** The server ends a session idle inside a
  transaction after :data:`IDLE_IN_TRANSACTION_S` (its transaction rolls back), and TCP
  keepalives notice a vanished peer within seconds.
- **No thread before the jail.** Landlock binds only the threads started after it (see
  :mod:`sandbox.jail`), and the pool runs worker threads (a change feed, :class:`Listener`,
  one more). A server's :class:`Postgres` is made with ``pooled=False``: until
  :meth:`Postgres.start_pool` (called once the jail is up) every use opens a plain
  connection of its own and closes it, which starts no thread, and no feed may start; the
  tables are always created that way.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import re
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import psycopg.conninfo
import psycopg.errors
import psycopg_pool

from fsnotes.state.database import SQL, Dialect, Rows

# psycopg_pool logs every connection handed out and returned at INFO, which the server's
# log level shows: one line per request is noise. Its warnings (a failed connection
# attempt, a reconnection given up) stay; they carry libpq's message, never the password.
logging.getLogger("psycopg.pool").setLevel(logging.WARNING)

SCHEMA_NAME = "fsnotes"
# A getconn that waits longer than this fails with "try again": a request must not hang
# while PostgreSQL is down (libpq's own connect attempt is bounded by CONNECT_TIMEOUT_S).
POOL_WAIT_S = 5.0
# libpq's connect_timeout (whole seconds; libpq treats values below 2 as 2).
CONNECT_TIMEOUT_S = 3
# How long one reconnection round keeps trying before it gives up (the pool backs off 1, 2,
# 4 ... s between attempts within it; the next request starts a new round). Short, so a
# server back after a long outage is found within seconds of the next request.
RECONNECT_S = 10.0
# lock_timeout: a confirmation claimed by another instance is decided within milliseconds
# (an unlink and a rename); a row or advisory lock held longer than this means that
# instance is stuck, and the request fails with "busy, try again" instead of waiting.
LOCK_WAIT_S = 10.0
# statement_timeout: no statement of ours scans more than a few thousand rows.
STATEMENT_TIMEOUT_S = 15.0
# idle_in_transaction_session_timeout: an instance frozen (or partitioned) inside a claim
# has its session ended by the server, so its locks go away; a claim's transaction is idle
# only while its one file operation runs.
IDLE_IN_TRANSACTION_S = 30.0
# Connections per process: handlers run at most 8 blocking steps at once
# (fsnotes/protocol/limits.py), and a grant approval writes its audit row on a second
# connection while its transaction holds the first.
POOL_MAX = 10
# TCP keepalives and a user timeout: a peer that vanished (a host gone, a cable pulled) is
# noticed within about 10 s instead of the kernel's two hours.
CONNECT_DEFAULTS: dict[str, Any] = {
    "connect_timeout": CONNECT_TIMEOUT_S,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
    "application_name": "fsnotes",
}
# DSN keys naming files libpq reads when it connects (later connections run in the jail).
_FILE_KEYS = ("passfile", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcrldir")
# What the C library reads to turn a host name into an address.
_RESOLVER_FILES = (
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
)
DEFAULT_PORT = 5432
# A change feed (Listener) wakes this often to see whether it should stop; it is also the
# wait before a failed callback is tried again.
FEED_POLL_S = 1.0
# A change feed calls its callback at least this often, notified or not (a notification
# lost in a reconnection race), and probes its connection then.
FEED_CHECK_S = 30.0
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

log = logging.getLogger("fsnotes.state")


class DatabaseSettingError(ValueError):
    """The DSN cannot be used; the message never contains it."""


def parse_dsn(dsn: str) -> dict[str, str]:
    """The DSN's parameters (a ``postgresql://`` URI or ``key=value`` pairs)."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        raise DatabaseSettingError(
            "the database setting is not a valid PostgreSQL connection string "
            "(expected postgresql://user:password@host:port/dbname)"
        ) from None
    return {k: str(v) for k, v in params.items() if v is not None}


def redact(dsn: str) -> str:
    """The database as the operator may see it: no password, no other secret parameters."""
    params = parse_dsn(dsn)
    user = params.get("user", "")
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port", "")
    name = params.get("dbname", "")
    where = f"{user}@" if user else ""
    if host.startswith("/"):
        return f"postgresql://{where}/{name} (socket {host}{f', port {port}' if port else ''})"
    return f"postgresql://{where}{host}{f':{port}' if port else ''}/{name}"


def scrubber(dsn: str) -> Callable[[str], str]:
    """A function removing this DSN's password (and the DSN itself) from a message."""
    secrets_ = [dsn]
    with contextlib.suppress(DatabaseSettingError):
        password = parse_dsn(dsn).get("password")
        if password:
            secrets_.append(password)
    secrets_.sort(key=len, reverse=True)

    def scrub(text: str) -> str:
        for secret in secrets_:
            text = text.replace(secret, "***")
        return text

    return scrub


def describe(exc: BaseException, scrub: Callable[[str], str]) -> str:
    """What ``exc`` means for the caller, as the end of "the ... store <describe>"."""
    if isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled):
        return "is busy (another instance is holding its lock); try again shortly"
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        # Connection refused, reset, ended by a shutdown, or no connection within the wait.
        return "is unreachable (PostgreSQL is down, restarting or overloaded); try again shortly"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    code = getattr(exc, "sqlstate", None)
    return f"cannot be used (PostgreSQL{f' {code}' if code else ''}: {scrub(first)[:200]})"


@functools.lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    # The stores write SQLite's '?'; psycopg's is '%s' (so a literal '%' doubles). None of
    # our statements has a '?' or '%' inside a string literal.
    return sql.replace("%", "%%").replace("?", "%s")


# SQLite's type words in the stores' schemas, in PostgreSQL's: REAL is 4 bytes there, too
# few for a Unix time, and SQLite's rowid alias becomes an identity column.
_TYPES = (
    (re.compile(r"\bINTEGER PRIMARY KEY\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
)


def _pg_types(statement: str) -> str:
    for pattern, replacement in _TYPES:
        statement = pattern.sub(replacement, statement)
    return statement


def _param(value: Any) -> Any:
    # Enums (SetupStatus, Access) are stored by value, as SQLite's adapter stores them.
    value_of = getattr(value, "value", None)
    return value if value_of is None else value_of


class _PgSQL:
    """A psycopg connection as the stores' :class:`~fsnotes.state.database.SQL`."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Rows:
        return self._conn.execute(_placeholders(sql), [_param(p) for p in parameters])


def _check(conn: psycopg.Connection[Any]) -> None:
    """Is this idle pooled connection still usable? Raises if not (the pool replaces it).

    An idle connection receives nothing unless its server ended it (a shutdown or restart
    sends a FATAL message, then closes the socket): so a socket with nothing to read is
    taken as alive without a round trip, and only one with something waiting is asked
    (psycopg_pool's own check, one empty query). Measured on the 2-core machine: the round
    trip on every checkout cost about 0.9 ms of a 3.4 ms claim. A server that vanished
    without a word (a host lost) is found by the first statement, a retryable error, or by
    the TCP keepalives.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    # poll(), not select(): select() refuses a descriptor of 1024 or more, which a server
    # holding many sockets and files reaches (tests/state/test_postgres_descriptors.py).
    waiting = select.poll()
    waiting.register(conn.fileno(), select.POLLIN)
    if waiting.poll(0):
        psycopg_pool.ConnectionPool.check_connection(conn)


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Session settings of every connection (autocommit: each SET stands on its own)."""
    conn.execute(f"SET search_path = {SCHEMA_NAME}")
    conn.execute(f"SET lock_timeout = '{int(LOCK_WAIT_S * 1000)}ms'")
    conn.execute(f"SET statement_timeout = '{int(STATEMENT_TIMEOUT_S * 1000)}ms'")
    conn.execute(
        f"SET idle_in_transaction_session_timeout = '{int(IDLE_IN_TRANSACTION_S * 1000)}ms'"
    )


class Postgres:
    """The process's connection pool on one DSN, opened on first use (see the module)."""

    def __init__(self, dsn: str, *, pooled: bool = True) -> None:
        params = parse_dsn(dsn)
        self._pooled = pooled
        self.where = redact(dsn)
        self.scrub = scrubber(dsn)
        self._params = params
        self._conninfo = psycopg.conninfo.make_conninfo("", **{**CONNECT_DEFAULTS, **params})
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None = None
        self._lock = threading.Lock()
        self._closed = False

    # --- what the jail must allow --------------------------------------------------------

    def tcp_ports(self) -> list[int]:
        """The TCP ports connections go to (none for a Unix socket)."""
        hosts = (self._params.get("host") or self._params.get("hostaddr") or "localhost").split(",")
        ports = (self._params.get("port") or str(DEFAULT_PORT)).split(",")
        out: list[int] = []
        for i, host in enumerate(hosts):
            if host.startswith("/"):
                continue
            raw = ports[i] if i < len(ports) else ports[-1]
            port = int(raw) if raw.strip().isdigit() else DEFAULT_PORT
            if port not in out:
                out.append(port)
        return out

    def read_paths(self) -> list[str]:
        """Files libpq may read on a later connection: those the DSN names, and the name
        resolver's when a host is a name rather than an address or a socket directory."""
        paths = [self._params[k] for k in _FILE_KEYS if self._params.get(k)]
        hosts = (self._params.get("host") or "").split(",")
        if not self._params.get("hostaddr") and any(
            h and not h.startswith("/") and not _is_address(h) for h in hosts
        ):
            paths += _RESOLVER_FILES
        return paths

    # --- connections ---------------------------------------------------------------------

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection (autocommit; transactions are explicit): the pool's, or, before
        :meth:`start_pool` on an unpooled instance, one of its own."""
        if not self._pooled:
            with self._direct() as conn:
                yield conn
            return
        with self._opened().connection() as conn:
            yield conn

    def start_pool(self) -> None:
        """From now on connections come from the pool (opened on first use)."""
        self._pooled = True

    def listen(self, channel: str, on_change: Callable[[], bool]) -> Listener:
        """A change feed on ``channel`` (see :class:`Listener`). It runs a thread, so an
        unpooled instance refuses until :meth:`start_pool` (the jail is up)."""
        if not self._pooled:
            raise RuntimeError("a change feed runs a thread: start it once the jail is up")
        return Listener(self, channel, on_change)

    @contextlib.contextmanager
    def _direct(self) -> Iterator[psycopg.Connection[Any]]:
        with psycopg.connect(self._conninfo, autocommit=True) as conn:
            _configure(conn)
            yield conn

    def _opened(self) -> psycopg_pool.ConnectionPool[psycopg.Connection[Any]]:
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self._closed:
                raise psycopg_pool.PoolClosed("the connection pool is closed")
            if self._pool is None:
                self._pool = psycopg_pool.ConnectionPool(
                    self._conninfo,
                    min_size=1,
                    max_size=POOL_MAX,
                    kwargs={"autocommit": True},
                    configure=_configure,
                    check=_check,
                    timeout=POOL_WAIT_S,
                    reconnect_timeout=RECONNECT_S,
                    name="fsnotes",
                    open=False,
                )
                # Not waiting: the first connection is made by the pool's worker while
                # this request waits for it (at most POOL_WAIT_S).
                self._pool.open(wait=False)
            return self._pool

    def create(self, statements: Sequence[str], lock_key: int) -> None:
        """Run a store's schema on a connection of its own (no pool, so no thread: this
        runs at start-up, before the jail), serialised with other instances doing the same."""
        with self._direct() as conn, conn.transaction():
            # Two instances creating the same schema or table at once can collide in
            # PostgreSQL's catalogue even with IF NOT EXISTS: one at a time.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA_NAME}")
            for statement in statements:
                conn.execute(_pg_types(statement))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _is_address(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a store's name."""
    digest = hashlib.blake2b(f"fsnotes:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgDB:
    """One store's view of the shared database (see
    :class:`~fsnotes.state.database.Database`)."""

    dialect: Dialect = "postgresql"

    def __init__(self, pg: Postgres, name: str, *, error: Callable[[str], Exception]) -> None:
        self._pg = pg
        self._key = lock_key(name)
        self._error = error
        self.where = pg.where
        # The connection a thread keeps inside :meth:`holding` (its session holds the locks).
        self._pinned = threading.local()

    def _fail(self, exc: BaseException) -> Exception:
        return self._error(describe(exc, self._pg.scrub))

    def watch(self, channel: str, on_change: Callable[[], bool]) -> Listener:
        """A change feed on ``channel`` (see :class:`Listener`); a transaction tells it of
        a change with :func:`notify`."""
        return self._pg.listen(channel, on_change)

    def notify(self, sql: SQL, channel: str) -> None:
        notify(sql, channel)

    def create(self, schema: Sequence[str]) -> None:
        try:
            self._pg.create(schema, lock_key("schema"))
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    def _connection(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        pinned: psycopg.Connection[Any] | None = getattr(self._pinned, "conn", None)
        if pinned is not None:
            return contextlib.nullcontext(pinned)
        return self._pg.connection()

    @contextlib.contextmanager
    def reading(self) -> Iterator[SQL]:
        try:
            with self._connection() as conn:
                yield _PgSQL(conn)
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    @contextlib.contextmanager
    def holding(self, locks: Sequence[tuple[str, bool]], *, wait: bool) -> Iterator[bool]:
        """Hold session-level advisory locks for the block, across any number of
        transactions: ``locks`` is (name, shared) pairs, taken in that order (coarser first,
        so that two holders never wait for each other); a shared one is held beside other
        shared holders of it, an exclusive one alone. The block's :meth:`reading`,
        :meth:`immediate` and :meth:`transaction` in this thread run on the session holding
        them (one pooled connection, not one more per statement).

        ``wait=True``: waits up to the session's lock timeout (:data:`LOCK_WAIT_S`), then
        the store's "busy, try again" error; yields True. ``wait=False``: yields False at
        once when another session holds one of them (nothing is held then).

        A process that dies, or a session the server ends, releases them with it; a release
        that fails ends the session too, so a lock never outlives its block on a pooled
        connection.
        """
        if getattr(self._pinned, "conn", None) is not None:
            raise RuntimeError("advisory locks are already held by this thread")
        keys = [(lock_key(name), "_shared" if shared else "") for name, shared in locks]
        try_ = "" if wait else "try_"
        # All in one statement (one round trip), taken left to right.
        take = "SELECT " + ", ".join(f"pg_{try_}advisory_lock{kind}(%s)" for _, kind in keys)
        try:
            with self._pg.connection() as conn:
                try:
                    row = conn.execute(take, [key for key, _ in keys]).fetchone()
                except psycopg.Error:
                    # A session lock taken before the one that timed out stays held (they
                    # ignore transactions): end the session, which drops every one of them.
                    conn.close()
                    raise
                got = tuple(row) if row is not None else (False,) * len(keys)
                held = [k for k, ok in zip(keys, got, strict=True) if wait or ok is True]
                try:
                    if len(held) < len(keys):
                        yield False
                        return
                    self._pinned.conn = conn
                    try:
                        yield True
                    finally:
                        self._pinned.conn = None
                finally:
                    _release(conn, held)
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    @contextlib.contextmanager
    def immediate(self) -> Iterator[SQL]:
        with self._transaction(serialise=True) as sql:
            yield sql

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[SQL]:
        with self._transaction(serialise=False, durable=durable) as sql:
            yield sql

    @contextlib.contextmanager
    def _transaction(self, *, serialise: bool, durable: bool = True) -> Iterator[SQL]:
        # Committed when the block ends, rolled back when it raises (psycopg's
        # Transaction); any driver error, the commit's included, becomes the store's.
        try:
            with self._connection() as conn, conn.transaction():
                if serialise:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                if not durable:
                    # PostgreSQL's asynchronous commit: durable within a moment
                    # (wal_writer_delay); a crash may lose it, never corrupt anything.
                    conn.execute("SET LOCAL synchronous_commit = off")
                yield _PgSQL(conn)
        except psycopg.Error as exc:
            raise self._fail(exc) from None


def _release(conn: psycopg.Connection[Any], held: Sequence[tuple[int, str]]) -> None:
    """Release session advisory locks (one statement); when that fails, end the session
    (which releases them): a pooled connection must never carry a lock into another
    request."""
    if not held or conn.closed:
        return
    try:
        release = "SELECT " + ", ".join(
            f"pg_advisory_unlock{kind}(%s)" for _, kind in reversed(held)
        )
        row = conn.execute(release, [key for key, _ in reversed(held)]).fetchone()
        if row is None or not all(row):
            raise psycopg.OperationalError("an advisory lock was not held at its release")
    except psycopg.Error:
        with contextlib.suppress(psycopg.Error):
            conn.close()


class Listener:
    """A change feed: ``on_change`` called in a thread of its own after every commit that
    notified ``channel`` (``NOTIFY``, see :func:`notify`), on a connection of its own.

    It is called once as soon as the feed listens (and again after every reconnection,
    since notifications sent while it was away are lost), and every :data:`FEED_CHECK_S`
    whatever happened, so a change is never missed for longer than that while the database
    is reachable. ``on_change`` returns whether it succeeded; when it did not, it is called
    again :data:`FEED_POLL_S` later. While the database is unreachable the feed retries its
    connection (backing off from 1 s to :data:`RECONNECT_S`) and calls nothing: whoever reads
    what ``on_change`` keeps up to date reads the last good state, without waiting.
    """

    def __init__(self, pg: Postgres, channel: str, on_change: Callable[[], bool]) -> None:
        if not _IDENTIFIER.fullmatch(channel):
            raise ValueError(f"not a channel name: {channel!r}")
        self._pg = pg
        self._channel = channel
        self._on_change = on_change
        self._stop = threading.Event()
        self.listening = False  # connected and listening now
        self._thread = threading.Thread(
            target=self._run, name=f"fsnotes-feed-{channel}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        delay = 1.0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._pg._conninfo, autocommit=True) as conn:
                    _configure(conn)
                    conn.execute(f"LISTEN {self._channel}")
                    self.listening, delay = True, 1.0
                    self._follow(conn)
            except psycopg.Error as exc:
                if not self._stop.is_set():
                    log.warning(
                        "the %s change feed %s", self._channel, describe(exc, self._pg.scrub)
                    )
            finally:
                self.listening = False
            self._stop.wait(delay)
            delay = min(delay * 2, RECONNECT_S)

    def _follow(self, conn: psycopg.Connection[Any]) -> None:
        pending, checked = True, time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - checked >= FEED_CHECK_S:
                conn.execute("SELECT 1")  # a connection that died silently raises here
                pending = True
            if pending:
                checked = time.monotonic()
                pending = not self._changed()
            for _ in conn.notifies(timeout=FEED_POLL_S, stop_after=1):
                pending = True

    def _changed(self) -> bool:
        try:
            return self._on_change()
        except Exception:  # the feed outlives a bad callback; the next change calls it again
            log.exception("the %s change feed's callback failed", self._channel)
            return False

    def close(self) -> None:
        """Stop (within :data:`FEED_POLL_S`; the thread is a daemon, nothing waits for it)."""
        self._stop.set()


def notify(sql: SQL, channel: str) -> None:
    """Tell every :class:`Listener` on ``channel`` when the transaction of ``sql`` commits
    (nothing if it rolls back)."""
    sql.execute("SELECT pg_notify(?, '')", (channel,))
