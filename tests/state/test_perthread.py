"""One SQLite connection per thread (fsnotes/state/perthread.py): every one can be closed,
and none is closed under a statement that is running on it."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsnotes.state.perthread import PerThread


class Closed(Exception):
    pass


@pytest.fixture
def conns(tmp_path: Path) -> Iterator[PerThread[sqlite3.Connection]]:
    path = tmp_path / "db.sqlite3"
    threads = PerThread(
        lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False),
        closed=lambda: Closed("closed"),
    )
    yield threads
    threads.close()


def _is_open(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return False
    return True


def _used_in_a_thread(
    conns: PerThread[sqlite3.Connection], *, hold: threading.Event | None = None
) -> tuple[threading.Thread, sqlite3.Connection]:
    """A new thread's connection, once its block has ended; the thread then waits for
    ``hold`` before ending (ends at once without it)."""
    seen: list[sqlite3.Connection] = []
    used = threading.Event()

    def run() -> None:
        with conns.using() as c:
            seen.append(c)
        used.set()
        if hold is not None:
            hold.wait(timeout=30)

    thread = threading.Thread(target=run)
    thread.start()
    assert used.wait(timeout=30)
    return thread, seen[0]


def test_each_thread_has_its_own_and_blocks_nest(conns: PerThread[sqlite3.Connection]) -> None:
    with conns.using() as outer, conns.using() as inner:
        assert outer is inner
    thread, theirs = _used_in_a_thread(conns)
    thread.join()
    assert theirs is not outer
    assert conns.open_count == 2


def test_close_closes_another_live_threads_idle_connection(
    conns: PerThread[sqlite3.Connection],
) -> None:
    hold = threading.Event()
    thread, theirs = _used_in_a_thread(conns, hold=hold)
    try:
        assert _is_open(theirs)
        conns.close()
        assert not _is_open(theirs)
        assert conns.open_count == 0
        with pytest.raises(Closed), conns.using():
            pass
    finally:
        hold.set()
        thread.join()


def test_a_busy_connection_is_closed_when_its_block_ends_not_under_it(
    conns: PerThread[sqlite3.Connection],
) -> None:
    entered, closed = threading.Event(), threading.Event()
    results: list[object] = []

    def busy() -> None:
        with conns.using() as c:
            entered.set()
            assert closed.wait(timeout=30)
            results.append(c.execute("SELECT 41 + 1").fetchone()[0])  # still usable
        results.append(_is_open(c))

    thread = threading.Thread(target=busy)
    thread.start()
    assert entered.wait(timeout=30)
    conns.close()
    assert conns.open_count == 1  # busy: waits for its block
    closed.set()
    thread.join()
    assert results[0] == 42
    assert results[1] is False
    assert conns.open_count == 0


def test_retire_gives_each_thread_a_new_connection_and_closes_the_old(
    conns: PerThread[sqlite3.Connection],
) -> None:
    with conns.using() as old:
        pass
    conns.retire()
    assert not _is_open(old)
    with conns.using() as new:
        assert new is not old and _is_open(new)


def test_a_retired_busy_connection_outlives_the_nested_block_that_replaced_it(
    conns: PerThread[sqlite3.Connection],
) -> None:
    with conns.using() as outer:
        conns.retire()
        with conns.using() as inner:
            assert inner is not outer
        assert _is_open(outer)  # its block is still running
    assert not _is_open(outer) and _is_open(inner)


def test_an_ended_threads_connection_is_closed_at_the_next_open(
    conns: PerThread[sqlite3.Connection],
) -> None:
    thread, theirs = _used_in_a_thread(conns)
    thread.join()
    assert _is_open(theirs)  # nothing has opened one since
    with conns.using():
        pass
    assert not _is_open(theirs)
    assert conns.open_count == 1
