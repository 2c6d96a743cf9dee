"""The history store's contract on both backends: the state directory's SQLite file and a
real PostgreSQL 15 (tests/pgcluster.py). Two "instances" are two stores opened on the same
backend from two state directories (on SQLite: the same directory, as processes sharing it
are): what one keeps, the other lists and restores, by the same number."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.state import postgres
from fsnotes.state.history_schema import REF_LIMIT, REF_RANDOM_BITS, row_overhead
from fsnotes.state.history_store import DB_NAME, HistoryStore, HistoryUnavailable, etag_of
from fsnotes.state.shared import SharedState

WS = "file:///srv/notes"
CHILD_TIMEOUT_S = 120.0


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Backend:
    """One backend (``dsn`` None: SQLite) and the stores opened on it."""

    def __init__(self, dsn: str | None, root: Path) -> None:
        self.dsn = dsn
        self.root = root
        self.opened: list[SharedState] = []

    def state_dir(self, instance: str) -> Path:
        # SQLite's store is the state directory's: every "instance" shares that one.
        path = self.root / ("state" if self.dsn is None else f"state-{instance}")
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def store(self, instance: str = "a", clock: Clock | None = None, **bounds: Any) -> HistoryStore:
        state = self.state_dir(instance)
        shared = SharedState.open(state, self.dsn)
        self.opened.append(shared)
        return HistoryStore(state, clock=clock or Clock(), shared=shared, **bounds)

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """A statement run beside fsnotes (no fsnotes code), on the history's own tables."""
        if self.dsn is None:
            db = sqlite3.connect(self.root / "state" / DB_NAME, isolation_level=None)
            try:
                return list(db.execute(sql.replace("history_", ""), args).fetchall())
            finally:
                db.close()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SET search_path = fsnotes")
            cur = conn.execute(sql.replace("?", "%s"), args)
            return list(cur.fetchall()) if cur.description else []

    def accounted(self, overhead: int) -> tuple[int, int]:
        """What the bound counts, recomputed from the tables (not the store's counter)."""
        ((blobs,),) = self.query("SELECT COALESCE(SUM(size), 0) FROM history_blob")
        ((versions,),) = self.query("SELECT COUNT(*) FROM history_version")
        return int(blobs) + int(versions) * overhead, int(versions)

    def close(self) -> None:
        for shared in self.opened:
            shared.close()


@pytest.fixture
def be(backend_dsn: str | None, tmp_path: Path) -> Iterator[Backend]:
    b = Backend(backend_dsn, tmp_path)
    yield b
    b.close()


def keep(store: HistoryStore, data: bytes, path: str = "a.md", **kw: Any) -> int:
    """One whole change as a tool makes it: the note's lock, copy, (the change), settle."""
    with store.writing(WS, path):
        vid = store.add(WS, path, data, principal=kw.get("principal", "ada"), tool="notes_update")
        store.settle(vid)
    return vid


def test_what_one_instance_keeps_every_other_lists_and_reads_by_the_same_number(
    be: Backend,
) -> None:
    clock = Clock()
    a, b = be.store("a", clock), be.store("b", clock)
    first = keep(a, b"one\n")
    clock.now += 5
    second = keep(b, b"two\n", principal="bob")
    keep(a, b"other\n", path="b.md")
    for store in (a, b):
        versions, total = store.versions(WS, "a.md", limit=10)
        assert total == 2 and [v.id for v in versions] == [second, first]
        assert [(v.principal, v.etag) for v in versions] == [
            ("bob", etag_of(b"two\n")),
            ("ada", etag_of(b"one\n")),
        ]
        found = store.version(WS, "a.md", first)
        assert found is not None and store.content(found) == b"one\n"


def test_version_numbers_grow_carry_the_second_and_fit_a_json_number(be: Backend) -> None:
    clock = Clock()
    store = be.store("a", clock)
    numbers = []
    for i in range(20):
        numbers.append(keep(store, f"v{i}\n".encode()))
        clock.now += 0.1 if i % 2 else 0  # several in one second, and the clock going on
    clock.now -= 3600  # a clock set back: still above the last
    numbers.append(keep(store, b"late\n"))
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert all(n < REF_LIMIT for n in numbers)
    assert numbers[0] >> REF_RANDOM_BITS == int(Clock().now)


def test_a_number_that_names_nothing_or_another_note_is_no_version(be: Backend) -> None:
    a, b = be.store("a"), be.store("b")
    mine = keep(a, b"mine\n")
    theirs = keep(a, b"theirs\n", path="other.md")
    assert b.version(WS, "a.md", theirs) is None  # another note's number
    assert b.version(WS, "a.md", mine + 1) is None  # never issued
    assert b.version(WS, "a.md", 1) is None  # a small counter's number
    assert b.version(WS, "a.md", mine) is not None


def test_the_same_bytes_are_stored_once_and_counted_by_the_triggers(be: Backend) -> None:
    store = be.store()
    for _ in range(5):
        keep(store, b"x" * 10_000)
    keep(store, b"y" * 3000, path="b.md")
    overhead = store.row_overhead
    assert store.usage() == be.accounted(overhead) == (13_000 + 6 * overhead, 6)
    assert be.query("SELECT COUNT(*) FROM history_blob") == [(2,)]


def test_a_pending_copy_is_never_listed_and_is_resolved_by_the_notes_next_writer(
    be: Backend,
) -> None:
    a, b = be.store("a"), be.store("b")
    with a.writing(WS, "a.md"):
        never = a.add(WS, "a.md", b"v0\n", principal="ada", tool="notes_update")
    # (a died before its change: the note still holds v0)
    assert b.versions(WS, "a.md", 10) == ([], 0) and b.version(WS, "a.md", never) is None
    assert b.has_pending(WS, "a.md")
    kept = keep(b, b"v0\n")  # b's update keeps v0 again: a's pending one is dropped
    with a.writing(WS, "a.md"):
        happened = a.add(WS, "a.md", b"v1\n", principal="ada", tool="notes_update")
    # (a died after its change: the note holds v2 when b next resolves it)
    b.resolve(WS, "a.md", etag_of(b"v2\n"))
    ids = [v.id for v in b.versions(WS, "a.md", 10)[0]]
    assert ids == [happened, kept] and not b.has_pending(WS, "a.md")
    assert b.usage() == be.accounted(b.row_overhead)


def test_prune_by_size_drops_the_oldest_first_and_keeps_within_the_bound(be: Backend) -> None:
    probe = be.store("probe")
    overhead = probe.row_overhead
    bound = 3 * (3000 + overhead)  # three versions of 3,000 bytes fit, not four
    a, b = be.store("a", max_bytes=bound), be.store("b", max_bytes=bound)
    ids = [keep(a if i % 2 else b, bytes([65 + i]) * 3000) for i in range(6)]
    used, count = a.usage()
    assert (used, count) == be.accounted(overhead) and count == 3 and used <= bound
    assert [v.id for v in b.versions(WS, "a.md", 10)[0]] == ids[:2:-1]  # newest three
    big = keep(a, b"z" * (bound - overhead - 100))
    assert [v.id for v in b.versions(WS, "a.md", 10)[0]] == [big]


def test_prune_by_age_removes_every_expired_version_at_once(
    be: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsnotes.state import history_store

    monkeypatch.setattr(history_store, "EXPIRED_BATCH", 64)  # several statements' worth
    clock = Clock()
    store = be.store("a", clock, max_age_s=3600)
    for i in range(300):
        keep(store, f"old {i}\n".encode(), path=f"n{i % 7}.md")
    keep(store, b"shared bytes\n", path="x.md")
    clock.now += 1800
    recent = keep(store, b"shared bytes\n", path="y.md")  # holds the same blob as x.md's
    clock.now += 1801
    assert store.has_expired()
    assert store.prune() == 301
    assert store.usage() == be.accounted(store.row_overhead) == (13 + store.row_overhead, 1)
    assert [v.id for v in store.versions(WS, "y.md", 10)[0]] == [recent]
    assert not store.has_expired()


def test_a_copy_whose_bytes_were_altered_is_refused_not_handed_out(be: Backend) -> None:
    store = be.store()
    keep(store, b"the real text\n")
    be.query("UPDATE history_blob SET data = ?", b"something else\n")
    (version,), _ = be.store("b").versions(WS, "a.md", 10)
    with pytest.raises(HistoryUnavailable, match="damaged"):
        store.content(version)


def test_a_notes_writer_excludes_its_writers_and_on_postgresql_no_other_notes(
    be: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "LOCK_WAIT_S", 0.3)  # read when a connection is made
    from fsnotes.state import history_store

    monkeypatch.setattr(history_store, "LOCK_TIMEOUT_S", 0.3)
    a, b = be.store("a"), be.store("b")
    with a.writing(WS, "a.md"):
        with b.writing_if_free(WS, "a.md") as free:
            assert free is False
        with b.writing_if_free() as free:
            assert free is False  # the whole store: no note written meanwhile
        started = time.monotonic()
        with pytest.raises(HistoryUnavailable, match="busy") as caught, b.writing(WS, "a.md"):
            pass
        assert time.monotonic() - started < 5 and "try again" in str(caught.value)
        if be.dsn is None:
            with b.writing_if_free(WS, "b.md") as free:
                assert free is False  # one file lock for the whole state directory
        else:
            keep(b, b"another note, side by side\n", path="b.md")
    with b.writing_if_free(WS, "a.md") as free:
        assert free is True
    with pytest.raises(RuntimeError), a.writing(WS, "a.md"):
        raise RuntimeError("the change failed")
    with b.writing_if_free() as free:
        assert free is True  # released after a failure too


def _die_holding(dsn: str | None, root: str, ready: Any) -> None:
    be = Backend(dsn, Path(root))
    store = be.store("dead")
    with store.writing(WS, "a.md"):
        store.add(WS, "a.md", b"kept by the dead\n", principal="ada", tool="notes_update")
        ready.set()
        time.sleep(60)  # killed here


def test_an_instance_killed_holding_a_notes_lock_releases_it(be: Backend) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=_die_holding, args=(be.dsn, str(be.root), ready))
    child.start()
    try:
        assert ready.wait(CHILD_TIMEOUT_S)
        store = be.store("b")
        with store.writing_if_free(WS, "a.md") as free:
            assert free is False
        assert child.pid is not None
        os.kill(child.pid, 9)
        child.join(CHILD_TIMEOUT_S)
        deadline = time.monotonic() + 10  # the server notices the closed session at once
        while True:
            with store.writing_if_free(WS, "a.md") as free:
                if free:
                    store.resolve(WS, "a.md", etag_of(b"changed by someone\n"))
                    break
            assert time.monotonic() < deadline, "the dead instance's lock was never released"
            time.sleep(0.05)
        ((version,), total) = store.versions(WS, "a.md", 10)
        assert total == 1 and store.content(version) == b"kept by the dead\n"
    finally:
        if child.is_alive():
            child.kill()
            child.join(CHILD_TIMEOUT_S)


def _writer(dsn: str | None, root: str, instance: str, rounds: int, barrier: Any) -> None:
    be = Backend(dsn, Path(root))
    store = be.store(instance, Clock(time.time()))
    barrier.wait()
    for i in range(rounds):
        path = f"{instance}.md" if i % 2 else "both.md"
        keep(store, f"{instance} {i}\n".encode(), path=path)
    be.close()


def test_two_instances_keeping_copies_at_once_keep_every_one(be: Backend) -> None:
    be.store("a")  # the tables exist before the race
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    rounds = 100
    procs = [
        ctx.Process(target=_writer, args=(be.dsn, str(be.root), name, rounds, barrier))
        for name in ("a", "b")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(CHILD_TIMEOUT_S)
        assert p.exitcode == 0
    store = be.store("c", Clock(time.time()))
    for name in ("a", "b"):
        versions, total = store.versions(WS, f"{name}.md", 1000)
        assert total == rounds // 2
        assert [store.content(v) for v in versions] == [
            f"{name} {i}\n".encode() for i in reversed(range(1, rounds, 2))
        ]
    both, total = store.versions(WS, "both.md", 1000)
    assert total == rounds and len({v.id for v in both}) == rounds
    assert store.usage() == be.accounted(store.row_overhead)
    assert row_overhead("sqlite" if be.dsn is None else "postgresql") == store.row_overhead
