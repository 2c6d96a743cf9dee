"""One SQLite connection per thread, all of which can be closed, whichever thread opened them.

sqlite3 connections must not be shared across threads mid-statement, so each thread that
touches a database gets its own (the state stores' files, the search index). Closing a
connection while another thread runs a statement on it can crash the process inside SQLite;
closing it while that thread is idle is safe. So every use is bracketed (:meth:`PerThread.using`),
and :meth:`PerThread.retire` and :meth:`PerThread.close` close the idle connections at once
and each busy one when its thread's outermost block on it ends.

A thread that ends leaves its connection open only until any thread next opens one, or
until :meth:`~PerThread.retire` or :meth:`~PerThread.close`. A live thread keeps its
connection between uses (a thread pool's workers keep theirs while they wait for work).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Closable(Protocol):
    def close(self) -> None: ...


# The standard library's sqlite3.Connection, or the search index's (sqlean's, the same API).
C = TypeVar("C", bound=Closable)


class _Held(Generic[C]):
    """A thread's connection, how deep its uses are nested, and whether it is retired
    (closed when ``depth`` falls to 0)."""

    __slots__ = ("conn", "depth", "retired", "thread")

    def __init__(self, conn: C) -> None:
        self.conn = conn
        self.thread = threading.current_thread()
        self.depth = 0
        self.retired = False


class PerThread(Generic[C]):
    """The connections ``connect`` opens, one per thread, used only inside :meth:`using`.

    ``connect`` must open with ``check_same_thread=False`` (so that an idle connection can
    be closed from another thread; each is still only used by its own). ``closed`` builds
    the exception :meth:`using` raises after :meth:`close`.
    """

    def __init__(
        self,
        connect: Callable[[], C],
        *,
        closed: Callable[[], Exception],
    ) -> None:
        self._connect = connect
        self._closed_error = closed
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[_Held[C]] = []
        self._closed = False

    @property
    def open_count(self) -> int:
        """How many connections are open now (busy ones waiting to close included)."""
        with self._lock:
            return len(self._all)

    def using(self) -> contextlib.AbstractContextManager[C]:
        """This thread's connection (opened on first use, or again after :meth:`retire`),
        for the length of the block. Blocks nest. Errors of ``connect`` propagate as they
        are; after :meth:`close`, ``closed()`` is raised."""
        return _Use(self)

    def retire(self) -> None:
        """Replace every connection (the file was replaced): the idle ones are closed now,
        the busy ones when their block ends; each thread's next use opens a new one."""
        self._retire_all()

    def close(self) -> None:
        """:meth:`retire`, and no new connection from now on."""
        with self._lock:
            self._closed = True
        self._retire_all()

    # --- plumbing --------------------------------------------------------------------------

    def _enter(self) -> _Held[C]:
        with self._lock:
            if self._closed:
                raise self._closed_error()
            held: _Held[C] | None = getattr(self._local, "held", None)
            if held is not None and not held.retired:
                held.depth += 1
                return held
            ended = self._take_ended()
        _close_all(ended)
        conn = self._connect()
        held = _Held(conn)
        with self._lock:
            if self._closed:  # closed while this one was being opened
                closing = True
            else:
                closing = False
                held.depth = 1
                self._all.append(held)
                self._local.held = held
        if closing:
            _close_all([conn])
            raise self._closed_error()
        return held

    def _leave(self, held: _Held[C]) -> None:
        with self._lock:
            held.depth -= 1
            if held.depth or not held.retired or held not in self._all:
                return
            self._all.remove(held)
        _close_all([held.conn])

    def _take_ended(self) -> list[C]:
        """Take out the connections of threads that have ended (the lock is held)."""
        ended = [h for h in self._all if not h.thread.is_alive()]
        for h in ended:
            self._all.remove(h)
        return [h.conn for h in ended]

    def _retire_all(self) -> None:
        closing = []
        with self._lock:
            for held in list(self._all):
                held.retired = True
                if held.depth == 0 or not held.thread.is_alive():
                    self._all.remove(held)
                    closing.append(held.conn)
        _close_all(closing)


class _Use(Generic[C]):
    """One block of :meth:`PerThread.using` (a class, not a generator function: the search
    index enters one per statement, and this is about a third cheaper, some 1 µs)."""

    __slots__ = ("_held", "_owner")

    def __init__(self, owner: PerThread[C]) -> None:
        self._owner = owner

    def __enter__(self) -> C:
        self._held = self._owner._enter()
        return self._held.conn

    def __exit__(self, *exc: object) -> None:
        self._owner._leave(self._held)


def _close_all(conns: list[C]) -> None:
    for conn in conns:
        # Nothing is lost if closing fails (an idle connection has no open transaction),
        # and the others must still be closed.
        with contextlib.suppress(Exception):
            conn.close()
