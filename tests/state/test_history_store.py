"""The history store on a real state directory: bounds, pending copies, busy and damaged
files, and two processes writing at once."""

from __future__ import annotations

import multiprocessing
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from fsnotes.state import history_store, statedir
from fsnotes.state.history_store import (
    DB_NAME,
    LOCK_NAME,
    ROW_OVERHEAD_BYTES,
    HistoryStore,
    HistoryUnavailable,
    etag_of,
)
from tests.e2e.state_helpers import corrupt, held

WS = "file:///home/ada/notes"
CHILD_TIMEOUT_S = 120.0


class Clock:
    """A settable clock (the store takes one, as the replay store does)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def open_store(state: Path, clock: Clock | None = None, **bounds: Any) -> HistoryStore:
    statedir.prepare_dir(state)
    return HistoryStore(state, clock=clock or Clock(), **bounds)


def keep(store: HistoryStore, data: bytes, path: str = "a.md", **kw: Any) -> int:
    """One whole change as a tool makes it: copy, (the change), settle."""
    with store.writing():
        vid = store.add(WS, path, data, principal=kw.get("principal", "ada"), tool="notes_update")
        store.settle(vid)
    return vid


def accounted(state: Path) -> tuple[int, int]:
    """What the bound counts, recomputed from the tables (not the store's counter)."""
    db = sqlite3.connect(state / DB_NAME)
    try:
        (blobs,) = db.execute("SELECT COALESCE(SUM(size), 0) FROM blob").fetchone()
        (versions,) = db.execute("SELECT COUNT(*) FROM version").fetchone()
    finally:
        db.close()
    return blobs + versions * ROW_OVERHEAD_BYTES, versions


def test_versions_are_listed_newest_first_with_principal_and_tool(tmp_path: Path) -> None:
    clock = Clock()
    store = open_store(tmp_path / "state", clock)
    first = keep(store, b"one\n")
    clock.now += 5
    second = keep(store, b"two\n", principal="bob")
    keep(store, b"other\n", path="b.md")
    versions, total = store.versions(WS, "a.md", limit=10)
    assert total == 2 and [v.id for v in versions] == [second, first]
    assert [(v.principal, v.tool, v.size, v.etag) for v in versions] == [
        ("bob", "notes_update", 4, etag_of(b"two\n")),
        ("ada", "notes_update", 4, etag_of(b"one\n")),
    ]
    assert versions[0].at == versions[1].at + 5
    assert store.content(versions[1]) == b"one\n"
    assert store.versions(WS, "a.md", limit=1)[0] == versions[:1]


def test_the_same_bytes_are_stored_once_however_many_versions_hold_them(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = open_store(state)
    data = b"x" * 10_000
    for _ in range(5):
        keep(store, data)
    assert store.usage() == accounted(state) == (10_000 + 5 * ROW_OVERHEAD_BYTES, 5)


def test_a_pending_copy_is_never_listed_and_is_dropped_if_the_note_still_holds_it(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "state")
    with store.writing():
        vid = store.add(WS, "a.md", b"old\n", principal="ada", tool="notes_update")
    # (the process died here, before its change)
    assert store.versions(WS, "a.md", 10) == ([], 0)
    assert store.version(WS, "a.md", vid) is None
    assert store.has_pending(WS, "a.md")
    store.resolve(WS, "a.md", etag_of(b"old\n"))  # the note still holds the kept bytes
    assert not store.has_pending(WS, "a.md")
    assert store.versions(WS, "a.md", 10) == ([], 0)
    assert store.usage() == (0, 0)  # the blob went with it


@pytest.mark.parametrize("now", [b"new\n", None], ids=["changed", "gone"])
def test_a_pending_copy_is_settled_if_the_note_no_longer_holds_it(
    tmp_path: Path, now: bytes | None
) -> None:
    store = open_store(tmp_path / "state")
    with store.writing():
        vid = store.add(WS, "a.md", b"old\n", principal="ada", tool="notes_delete")
    store.resolve(WS, "a.md", None if now is None else etag_of(now))
    (version,), total = store.versions(WS, "a.md", 10)
    assert total == 1 and version.id == vid and store.content(version) == b"old\n"


def test_the_next_copy_of_a_note_resolves_the_copies_a_killed_process_left(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "state")
    with store.writing():
        never = store.add(WS, "a.md", b"v0\n", principal="ada", tool="notes_update")
    # killed before its change: the note still holds v0, which the next update now keeps
    with store.writing():
        store.settle(store.add(WS, "a.md", b"v0\n", principal="ada", tool="notes_update"))
    with store.writing():
        happened = store.add(WS, "a.md", b"v1\n", principal="ada", tool="notes_update")
    # killed after its change: the note holds v2 when the next update keeps it
    with store.writing():
        store.settle(store.add(WS, "a.md", b"v2\n", principal="ada", tool="notes_update"))
    ids = [v.id for v in store.versions(WS, "a.md", 10)[0]]
    assert never not in ids and happened in ids and len(ids) == 3


def test_prune_by_size_drops_the_oldest_first_and_keeps_within_the_bound(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bound = 3 * (3000 + ROW_OVERHEAD_BYTES)  # three versions of 3,000 bytes fit, not four
    store = open_store(state, max_bytes=bound)
    ids = [keep(store, bytes([65 + i]) * 3000) for i in range(6)]
    used, count = store.usage()
    assert (used, count) == accounted(state)
    assert count == 3 and used <= bound
    assert [v.id for v in store.versions(WS, "a.md", 10)[0]] == ids[:2:-1]  # newest three
    # a large one makes room by dropping as many old ones as it needs
    big = keep(store, b"z" * (bound - ROW_OVERHEAD_BYTES - 100))
    assert [v.id for v in store.versions(WS, "a.md", 10)[0]] == [big]
    assert store.usage()[0] <= bound


def test_a_copy_larger_than_the_whole_bound_is_refused_and_nothing_is_dropped(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "state", max_bytes=10_000)
    kept = keep(store, b"small\n")
    with store.writing(), pytest.raises(HistoryUnavailable, match="is full"):
        store.add(WS, "a.md", b"x" * 10_001, principal="ada", tool="notes_update")
    assert [v.id for v in store.versions(WS, "a.md", 10)[0]] == [kept]


def test_prune_by_age_hides_old_versions_at_once_and_deletes_them_on_the_next_write(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    clock = Clock()
    store = open_store(state, clock, max_age_s=3600)
    old = keep(store, b"old\n")
    clock.now += 1800
    middle = keep(store, b"middle\n")
    clock.now += 1801  # 'old' is past the bound, 'middle' is not
    assert [v.id for v in store.versions(WS, "a.md", 10)[0]] == [middle]
    assert store.version(WS, "a.md", old) is None
    assert store.usage()[1] == 2  # still on disk until something prunes
    keep(store, b"new\n", path="other.md")
    assert store.usage()[1] == 2 and accounted(state)[1] == 2  # old gone, middle + new
    clock.now += 4000
    assert store.prune() == 2  # what a restart does
    assert store.usage() == (0, 0) == accounted(state)


def test_pruned_space_goes_back_to_the_filesystem(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = open_store(state, max_bytes=2 * 1024 * 1024)
    for i in range(8):
        keep(store, bytes([65 + i]) * (1024 * 1024 - 1000))
    db = sqlite3.connect(state / DB_NAME)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    # at most two copies of ~1 MiB are kept; without the vacuum the file would hold the
    # freed pages too (still bounded by the peak, but not by the bound)
    assert (state / DB_NAME).stat().st_size < 2.5 * 1024 * 1024


def test_a_writer_held_up_by_another_process_gets_busy_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    store = open_store(state)
    monkeypatch.setattr(history_store, "LOCK_TIMEOUT_S", 0.2)
    with held(state / LOCK_NAME, "flock"):
        started = time.monotonic()
        with pytest.raises(HistoryUnavailable, match="is busy") as caught, store.writing():
            pass
        assert time.monotonic() - started < 5
        assert "try again" in str(caught.value)
        with store.writing_if_free() as free:
            assert free is False
    with store.writing_if_free() as free:
        assert free is True


def test_a_damaged_store_is_refused_with_a_reason(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = open_store(state)
    keep(store, b"v\n")
    corrupt(state / DB_NAME)
    with pytest.raises(HistoryUnavailable, match="cannot be used"):
        store.versions(WS, "a.md", 10)
    with pytest.raises(HistoryUnavailable, match="cannot be used"):
        open_store(state)


def test_a_kept_copy_whose_bytes_were_altered_is_refused_not_restored(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = open_store(state)
    keep(store, b"the real text\n")
    db = sqlite3.connect(state / DB_NAME)
    db.execute("UPDATE blob SET data = ?", (b"something else\n",))
    db.commit()
    db.close()
    (version,), _ = store.versions(WS, "a.md", 10)
    with pytest.raises(HistoryUnavailable, match="damaged"):
        store.content(version)


def test_the_store_files_are_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = open_store(state)
    keep(store, b"v\n")
    names = {p.name: stat.S_IMODE(p.stat().st_mode) for p in state.iterdir()}
    assert {DB_NAME, f"{DB_NAME}-wal", LOCK_NAME} <= set(names)
    assert {n: m for n, m in names.items() if m != 0o600} == {}


def _writer(state: str, path: str, rounds: int, barrier: Any) -> None:
    store = HistoryStore(Path(state), clock=time.time)
    barrier.wait()
    for i in range(rounds):
        with store.writing():
            vid = store.add(WS, path, f"{path} {i}\n".encode(), principal="ada", tool="t")
            store.settle(vid)


def test_two_processes_keeping_copies_at_once_keep_every_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    open_store(state)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    rounds = 150
    procs = [
        ctx.Process(target=_writer, args=(str(state), name, rounds, barrier))
        for name in ("a.md", "b.md")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(CHILD_TIMEOUT_S)
        assert p.exitcode == 0
    store = open_store(state)
    for name in ("a.md", "b.md"):
        versions, total = store.versions(WS, name, 1000)
        assert total == rounds
        assert [store.content(v) for v in versions] == [
            f"{name} {i}\n".encode() for i in reversed(range(rounds))
        ]
    assert store.usage() == accounted(state)


# The file as fsnotes made it before version numbers were the time and chance (schema 1):
# the version's counter was its number.
SCHEMA_1 = """
PRAGMA auto_vacuum = INCREMENTAL;
PRAGMA journal_mode = WAL;
PRAGMA user_version = 1;
CREATE TABLE blob (id INTEGER PRIMARY KEY, etag TEXT NOT NULL UNIQUE, size INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE TABLE version (id INTEGER PRIMARY KEY AUTOINCREMENT, workspace TEXT NOT NULL,
  path TEXT NOT NULL, at REAL NOT NULL, blob INTEGER NOT NULL REFERENCES blob(id),
  principal TEXT NOT NULL, tool TEXT NOT NULL, moved_to TEXT, pending INTEGER NOT NULL);
CREATE INDEX version_note ON version(workspace, path, pending, id);
CREATE INDEX version_at ON version(at);
CREATE INDEX version_blob ON version(blob);
CREATE TABLE usage (one INTEGER PRIMARY KEY CHECK (one = 1), bytes INTEGER NOT NULL);
INSERT INTO usage(one, bytes) VALUES (1, 0);
CREATE TRIGGER blob_in AFTER INSERT ON blob BEGIN UPDATE usage SET bytes = bytes + NEW.size; END;
CREATE TRIGGER blob_out AFTER DELETE ON blob BEGIN UPDATE usage SET bytes = bytes - OLD.size; END;
CREATE TRIGGER version_in AFTER INSERT ON version
  BEGIN UPDATE usage SET bytes = bytes + 384; END;
CREATE TRIGGER version_out AFTER DELETE ON version
  BEGIN UPDATE usage SET bytes = bytes - 384; END;
"""


def test_a_file_of_schema_1_keeps_its_versions_and_their_numbers(tmp_path: Path) -> None:
    state = tmp_path / "state"
    statedir.prepare_dir(state)
    clock = Clock()
    db = sqlite3.connect(state / DB_NAME, isolation_level=None)
    db.executescript(SCHEMA_1)
    for i, text in enumerate((b"one\n", b"two\n"), start=1):
        db.execute("INSERT INTO blob(etag, size, data) VALUES (?, ?, ?)", (etag_of(text), 4, text))
        db.execute(
            "INSERT INTO version(workspace, path, at, blob, principal, tool, pending)"
            " VALUES (?, 'a.md', ?, ?, 'ada', 'notes_update', 0)",
            (WS, clock.now, i),
        )
    db.close()
    store = open_store(state, clock)
    versions, total = store.versions(WS, "a.md", 10)
    assert total == 2 and [v.id for v in versions] == [2, 1]  # the numbers people were shown
    old = store.version(WS, "a.md", 1)
    assert old is not None and store.content(old) == b"one\n"
    new = keep(store, b"three\n")
    assert new > 2 and [v.id for v in store.versions(WS, "a.md", 10)[0]] == [new, 2, 1]
    assert store.usage() == accounted(state)
    again = open_store(state, clock)  # a second open finds it migrated
    assert [v.id for v in again.versions(WS, "a.md", 10)[0]] == [new, 2, 1]
    db = sqlite3.connect(state / DB_NAME)
    assert db.execute("PRAGMA user_version").fetchone() == (2,)
    db.close()
