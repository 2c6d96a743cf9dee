"""What a shared-state store needs of its database, whichever backend holds it.

The stores (replay, setup and grants, audit) are written once, in SQL both SQLite and
PostgreSQL accept, against :class:`Database`: the state directory's SQLite file
(:class:`~fsnotes.state.sqlite.LocalDB`, the default) or one PostgreSQL database shared by
many instances (:class:`~fsnotes.state.postgres.PgDB`). Parameters are written ``?``; the
PostgreSQL side turns them into its own placeholders.

Every failure of the database reaches the store's caller as the store's own exception (built
by the ``error`` each database is given), with a sentence saying whether a retry may help;
never a raw driver exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

Dialect = Literal["sqlite", "postgresql"]


class Rows(Protocol):
    """What a statement returns: its rows, or how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SQL(Protocol):
    """A connection inside one of :class:`Database`'s blocks."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Rows: ...


class ChangeFeed(Protocol):
    """A thread telling one process of the changes other processes commit (see
    :meth:`Database.watch`)."""

    @property
    def listening(self) -> bool:
        """Connected and told of changes now (false while the database is unreachable)."""
        ...

    def close(self) -> None: ...


class Database(Protocol):
    """One store's database. ``where`` names it for the operator (never with a password)."""

    dialect: Dialect
    where: str

    def create(self, schema: Sequence[str]) -> None:
        """Create or migrate the store's tables (``schema`` in one transaction, serialised
        with every other instance doing the same)."""
        ...

    def reading(self) -> contextlib.AbstractContextManager[SQL]:
        """Reads, and single statements that commit on their own."""
        ...

    def immediate(self) -> contextlib.AbstractContextManager[SQL]:
        """A write transaction serialised with every other one on this store (SQLite's
        ``BEGIN IMMEDIATE``; a transaction-scoped advisory lock on PostgreSQL): committed
        when the block ends, rolled back when it raises."""
        ...

    def transaction(self, *, durable: bool = True) -> contextlib.AbstractContextManager[SQL]:
        """A write transaction that other ones on this store may run beside, where the rows
        it touches are what conflicts (on SQLite the same as :meth:`immediate`).
        ``durable=False``: its commit returns before it is on disk (a crash may lose it,
        never a transaction committed durably before or after it)."""
        ...

    def watch(self, channel: str, on_change: Callable[[], bool]) -> ChangeFeed | None:
        """Call ``on_change`` in a thread of its own soon after any process commits a
        transaction that called :meth:`notify` for ``channel`` (and when the feed starts or
        reconnects; ``on_change`` returns whether it succeeded, and is called again if not).
        ``None``: this backend has no feed (SQLite: reading is local and never waits, so a
        reader checks for itself). A feed runs a thread: start it once the jail is up."""
        ...

    def notify(self, sql: SQL, channel: str) -> None:
        """Within a transaction on ``sql``: tell the feeds on ``channel`` when it commits."""
        ...
