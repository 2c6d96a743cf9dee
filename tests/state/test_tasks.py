"""The task store on both backends (the state directory's SQLite, PostgreSQL): a task is seen
by its principal only, from any opening of the store; its owner's beat keeps it alive, a
silent owner's task reads as failed once and for good; answers and cancels reach the owner;
rows go at their TTL."""

from __future__ import annotations

from typing import Any

import pytest

from fsnotes.state.shared import SharedState
from fsnotes.state.tasks import SQLTaskStore, TaskStoreFull, open_tasks

LOST = {"code": -32603, "message": "lost"}
STALE_S = 30.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def store_of(backend: SharedState, clock: Clock) -> SQLTaskStore:
    return open_tasks(backend, clock=clock, stale_after=STALE_S, lost=LOST)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_task_is_seen_by_its_principal_from_another_opening_and_by_nobody_else(
    backend: SharedState, clock: Clock
) -> None:
    owner = store_of(backend, clock)
    other = store_of(backend, clock)  # another instance over the same backend
    row = owner.create("t1", "alice", "inst-a", ttl_ms=60_000, poll_ms=500)
    assert row.status == "working" and not row.ended
    seen = other.get("t1", "alice")
    assert seen is not None and seen.task_id == "t1" and seen.created_at == clock.now
    # Another principal's id and an unknown id are answered alike.
    assert other.get("t1", "mallory") is None
    assert other.get("nope", "mallory") is None
    assert other.answer("t1", "mallory", {"k": {}}) is None
    assert other.request_cancel("t1", "mallory") is None
    assert not other.get("t1", "alice").cancel_requested  # type: ignore[union-attr]


def test_result_is_inlined_once_finished_and_kept_for_its_ttl(
    backend: SharedState, clock: Clock
) -> None:
    store = store_of(backend, clock)
    store.create("t2", "alice", "inst-a", ttl_ms=60_000, poll_ms=500)
    result: dict[str, Any] = {"content": [{"type": "text", "text": "done"}], "isError": False}
    assert store.finish("t2", "inst-a", "completed", result=result)
    assert not store.finish("t2", "inst-a", "failed", error=LOST)  # ended: stays as it is
    clock.now += 59
    row = store.get("t2", "alice")
    assert row is not None and row.status == "completed" and row.result == result
    clock.now += 2
    assert store.get("t2", "alice") is None
    assert store.prune() == 1


def test_a_task_whose_owner_stops_beating_reads_failed_and_the_owner_cannot_undo_it(
    backend: SharedState, clock: Clock
) -> None:
    store = store_of(backend, clock)
    store.create("t3", "alice", "inst-a", ttl_ms=600_000, poll_ms=500)
    clock.now += STALE_S / 2
    assert store.beat("t3", "inst-a", "rewriting 10 of 500") is not None
    clock.now += STALE_S / 2 + 1  # beaten within the window: alive
    row = store.get("t3", "alice")
    assert row is not None and row.status == "working" and row.message == "rewriting 10 of 500"
    clock.now += STALE_S  # silent for longer than the window: its instance died
    row = store.get("t3", "alice")
    assert row is not None and row.status == "failed" and row.error == LOST
    # The owner coming back late changes nothing: never completed after it read failed.
    assert not store.finish("t3", "inst-a", "completed", result={"content": []})
    late = store.beat("t3", "inst-a", "late")
    assert late is not None and late.ended
    assert store.get("t3", "alice").status == "failed"  # type: ignore[union-attr]


def test_answers_are_gathered_key_by_key_until_none_is_pending(
    backend: SharedState, clock: Clock
) -> None:
    owner = store_of(backend, clock)
    client = store_of(backend, clock)
    owner.create("t4", "alice", "inst-a", ttl_ms=60_000, poll_ms=500)
    asks = {"a": {"method": "elicitation/create"}, "b": {"method": "elicitation/create"}}
    assert owner.park("t4", "inst-a", asks)
    row = client.answer("t4", "alice", {"a": {"action": "accept"}, "zzz": {"ignored": True}})
    assert row is not None and row.status == "input_required"
    assert row.input_requests == {"b": {"method": "elicitation/create"}}
    assert owner.take_answers("t4", "inst-a") is None  # b still pending
    row = client.answer("t4", "alice", {"b": {"action": "decline"}})
    assert row is not None and row.status == "working" and row.input_requests is None
    assert owner.take_answers("t4", "inst-a") == {
        "a": {"action": "accept"},
        "b": {"action": "decline"},
    }
    assert owner.take_answers("t4", "inst-a") is None  # taken once


def test_a_cancel_asked_anywhere_reaches_the_owner_at_its_beat(
    backend: SharedState, clock: Clock
) -> None:
    owner = store_of(backend, clock)
    client = store_of(backend, clock)
    owner.create("t5", "alice", "inst-a", ttl_ms=60_000, poll_ms=500)
    row = client.request_cancel("t5", "alice")
    assert row is not None and row.cancel_requested
    beat = owner.beat("t5", "inst-a", None)
    assert beat is not None and beat.cancel_requested
    assert owner.finish("t5", "inst-a", "cancelled")
    # A cancel of an ended task leaves it as it is.
    assert client.request_cancel("t5", "alice").status == "cancelled"  # type: ignore[union-attr]


def test_only_the_owner_writes_progress_and_the_end(backend: SharedState, clock: Clock) -> None:
    store = store_of(backend, clock)
    store.create("t6", "alice", "inst-a", ttl_ms=60_000, poll_ms=500)
    assert not store.finish("t6", "inst-b", "completed", result={"content": []})
    assert not store.park("t6", "inst-b", {"k": {}})
    store.beat("t6", "inst-b", "not mine")
    assert store.get("t6", "alice").message is None  # type: ignore[union-attr]


def test_the_store_refuses_new_tasks_past_its_bound(
    backend: SharedState, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsnotes.state.tasks as tasks

    monkeypatch.setattr(tasks, "MAX_ROWS", 2)
    store = store_of(backend, clock)
    store.create("a", "alice", "i", ttl_ms=1_000, poll_ms=500)
    store.create("b", "alice", "i", ttl_ms=1_000, poll_ms=500)
    with pytest.raises(TaskStoreFull):
        store.create("c", "alice", "i", ttl_ms=1_000, poll_ms=500)
    clock.now += 2  # the first two expired: pruned by the next create
    store.create("c", "alice", "i", ttl_ms=1_000, poll_ms=500)


def test_a_task_running_past_its_ttl_is_kept_while_its_owner_beats(
    backend: SharedState, clock: Clock
) -> None:
    store = store_of(backend, clock)
    store.create("t7", "alice", "inst-a", ttl_ms=10_000, poll_ms=500)
    for _ in range(5):  # 25 s of work, a beat every 5 s: over twice its TTL
        clock.now += 5
        assert store.beat("t7", "inst-a", None) is not None
    row = store.get("t7", "alice")
    assert row is not None and row.status == "working"
    assert store.finish("t7", "inst-a", "completed", result={"content": []})
    clock.now += 11  # then kept for its TTL after it ended, not longer
    assert store.get("t7", "alice") is None
