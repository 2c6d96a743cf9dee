"""The replay store: a nonce is claimed once, across processes; failures roll back."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from fsnotes.state.replay import AlreadyUsed, SQLiteReplayStore
from tests.e2e.state_helpers import corrupt, held, in_fresh_thread


def test_claim_once(tmp_path: Path) -> None:
    store = SQLiteReplayStore(tmp_path, clock=time.time)
    with store.claim("n1", time.time() + 60):
        pass
    assert store.is_used("n1")
    with pytest.raises(AlreadyUsed), store.claim("n1", time.time() + 60):
        pass


def test_failed_action_leaves_nonce_unclaimed(tmp_path: Path) -> None:
    store = SQLiteReplayStore(tmp_path, clock=time.time)
    with pytest.raises(RuntimeError), store.claim("n2", time.time() + 60):
        raise RuntimeError("unlink failed")
    assert not store.is_used("n2")
    with store.claim("n2", time.time() + 60):
        pass
    assert store.is_used("n2")


def test_expired_nonces_are_pruned(tmp_path: Path) -> None:
    now = [1000.0]
    store = SQLiteReplayStore(tmp_path, clock=lambda: now[0])
    with store.claim("old", 1010):
        pass
    now[0] = 2000.0
    assert store.prune(now[0]) == 1
    assert not store.is_used("old")


def _claimer(state_dir: str, nonce: str, barrier: Any, out: Any) -> None:
    store = SQLiteReplayStore(Path(state_dir), clock=time.time)
    barrier.wait()
    try:
        with store.claim(nonce, time.time() + 60):
            time.sleep(0.05)  # hold the critical section so the other process must wait
        out.put("claimed")
    except AlreadyUsed:
        out.put("already-used")


def test_two_processes_claim_the_same_nonce_once(tmp_path: Path) -> None:
    SQLiteReplayStore(tmp_path, clock=time.time)  # create the schema first
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(5):
        barrier = ctx.Barrier(2)
        out = ctx.Queue()
        procs = [
            ctx.Process(target=_claimer, args=(str(tmp_path), f"race-{round_}", barrier, out))
            for _ in range(2)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        results = sorted([out.get(timeout=5), out.get(timeout=5)])
        assert results == ["already-used", "claimed"]


def test_a_held_lock_is_reported_as_busy_not_as_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from fsnotes.state import replay

    monkeypatch.setattr(replay, "LOCK_TIMEOUT_S", 0.2)
    store = replay.SQLiteReplayStore(tmp_path, clock=time.time)
    holder = sqlite3.connect(tmp_path / replay.DB_NAME, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(replay.StoreBusy), store.claim("n3", time.time() + 60):
            pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not store.is_used("n3")


def test_a_fresh_threads_first_claim_is_busy_while_another_process_holds_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsnotes.state import replay

    monkeypatch.setattr(replay, "LOCK_TIMEOUT_S", 0.2)
    store = replay.SQLiteReplayStore(tmp_path, clock=time.time)
    with held(tmp_path / replay.DB_NAME, "immediate"):
        exc = in_fresh_thread(lambda: store.claim("n4", time.time() + 60).__enter__())
    assert isinstance(exc, replay.StoreBusy), exc
    assert "busy" in str(exc) and "try again" in str(exc)
    assert not store.is_used("n4")


def test_a_fresh_threads_first_call_on_a_corrupted_database_is_a_store_error_not_sqlite(
    tmp_path: Path,
) -> None:
    from fsnotes.state import replay

    store = replay.SQLiteReplayStore(tmp_path, clock=time.time)
    corrupt(tmp_path / replay.DB_NAME)
    for call in (
        lambda: store.claim("n5", time.time() + 60).__enter__(),
        lambda: store.is_used("n5"),
        lambda: store.prune(time.time()),
    ):
        exc = in_fresh_thread(call)
        assert isinstance(exc, replay.StoreBusy), exc
        assert "cannot be used" in str(exc)


def _claim_with_a_full_disk(state_dir: str, victim: str, out: Any) -> None:
    import resource
    import signal
    import sqlite3

    from fsnotes.state import replay

    store = replay.SQLiteReplayStore(Path(state_dir), clock=time.time)
    flush = sqlite3.connect(Path(state_dir) / replay.DB_NAME)
    flush.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the claim's commit must grow the log
    flush.close()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, resource.RLIM_INFINITY))
    try:
        with store.claim("n6", time.time() + 60):
            os.unlink(victim)  # the guarded action: done before the commit
        out.put("committed")
    except Exception as exc:
        out.put(type(exc).__name__)


def test_a_claim_whose_commit_fails_after_the_action_is_not_reported_as_nothing_done(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "note.md"
    victim.write_text("x")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_claim_with_a_full_disk, args=(str(state), str(victim), out))
    proc.start()
    outcome = out.get(timeout=30)
    proc.join(30)
    assert not victim.exists()  # the action ran
    assert outcome == "ClaimNotRecorded"  # not StoreBusy, which means nothing was done
    assert not SQLiteReplayStore(state, clock=time.time).is_used("n6")
