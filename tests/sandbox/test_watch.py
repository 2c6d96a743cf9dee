"""sandbox.watch: inotify hints for folders below a Root, added by descriptor (both resolvers)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sandbox.root import Root
from sandbox.watch import DirectoryWatcher, WatchEvent


def events_until(watcher: DirectoryWatcher, want: int, timeout: float = 2.0) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out += watcher.read()
        time.sleep(0.01)
    return out


@pytest.fixture
def ws(tmp_path: Path, resolver: str) -> Path:
    (tmp_path / "ws" / "sub").mkdir(parents=True)
    return tmp_path / "ws"


def test_events_name_the_watched_folder_and_the_entry(ws: Path) -> None:
    with Root.open(ws) as root:
        watcher = DirectoryWatcher(10)
        try:
            assert watcher.add(root, ("sub",), "tok")
            (ws / "sub" / "a.md").write_text("x")
            (ws / "sub" / "a.md").rename(ws / "sub" / "b.md")
            (ws / "sub" / "b.md").unlink()
            seen = events_until(watcher, 4)
            names = [(e.token, e.parts, e.name) for e in seen]
            assert ("tok", ("sub",), "a.md") in names and ("tok", ("sub",), "b.md") in names
            assert any(e.gone and e.name == "b.md" for e in seen)
        finally:
            watcher.close()


def test_a_symlinked_folder_cannot_be_watched_and_nothing_outside_is(
    ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    with Root.open(ws) as root:
        watcher = DirectoryWatcher(10)
        try:
            assert not watcher.add(root, ("link",), "tok")
            assert watcher.watches == 0
            (outside / "secret.md").write_text("x")
            assert events_until(watcher, 1, timeout=0.3) == []
        finally:
            watcher.close()


def test_a_watch_follows_the_folder_not_its_name(ws: Path) -> None:
    # By descriptor: after the folder is renamed, a new folder at the old name is not
    # watched (the caller re-adds folders it finds by rescanning).
    with Root.open(ws) as root:
        watcher = DirectoryWatcher(10)
        try:
            assert watcher.add(root, ("sub",), "tok")
            (ws / "sub").rename(ws / "moved")
            (ws / "sub").mkdir()
            (ws / "sub" / "new.md").write_text("x")
            (ws / "moved" / "old.md").write_text("x")
            seen = {e.name for e in events_until(watcher, 2)}
            assert "old.md" in seen and "new.md" not in seen
        finally:
            watcher.close()


def test_the_budget_bounds_the_watches(ws: Path) -> None:
    for name in "abc":
        (ws / name).mkdir()
    with Root.open(ws) as root:
        watcher = DirectoryWatcher(2)
        try:
            assert watcher.add(root, ("a",), "t") and watcher.add(root, ("b",), "t")
            assert not watcher.add(root, ("c",), "t")
            assert watcher.exhausted and watcher.watches == 2
            watcher.drop_below("t", ("a",))
            assert watcher.watches == 1 and watcher.add(root, ("c",), "t")
        finally:
            watcher.close()


def test_dropping_a_tree_forgets_every_folder_below_it(ws: Path) -> None:
    (ws / "sub" / "deep").mkdir()
    with Root.open(ws) as root:
        watcher = DirectoryWatcher(10)
        try:
            for parts in [(), ("sub",), ("sub", "deep")]:
                assert watcher.add(root, parts, "t")
            watcher.drop_below("t", ("sub",))
            assert watcher.watches == 1
            (ws / "sub" / "deep" / "x.md").write_text("x")
            (ws / "top.md").write_text("x")
            assert {e.name for e in events_until(watcher, 1)} == {"top.md"}
        finally:
            watcher.close()


def test_an_overflow_is_reported(ws: Path) -> None:
    with Root.open(ws) as root:
        watcher = DirectoryWatcher(10)
        try:
            assert watcher.add(root, ("sub",), "t")
            limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
            if limit > 100_000:
                pytest.skip(f"max_queued_events is {limit}: too many files to overflow it")
            for i in range(limit + 10):
                fd = os.open(ws / "sub" / f"f{i % 50}", os.O_WRONLY | os.O_CREAT, 0o600)
                os.close(fd)
            events = []
            while batch := watcher.read():
                events += batch
            assert any(e.overflow for e in events)
        finally:
            watcher.close()
