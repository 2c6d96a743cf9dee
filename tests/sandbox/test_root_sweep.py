"""Root.remove_stale_temps: our own leftovers go, live ones and everything else stay.

Liveness is a real flock held by a real other process; races are real processes and
threads on real files. Both resolvers.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

import sandbox.root as sandbox_root
from sandbox.errors import IdentityMismatch
from sandbox.root import (
    REMOVE_PREFIX,
    TEMP_PREFIX,
    Resolver,
    Root,
    is_leftover_name,
    openat2_available,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Resolver:
    if request.param == "openat2" and not openat2_available():
        pytest.skip("openat2 is not usable on this kernel/seccomp profile")
    monkeypatch.setenv("FSNOTES_RESOLVER", request.param)
    return cast(Resolver, request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def root(ws: Path, resolver: Resolver) -> Iterator[Root]:
    with Root.open(ws, resolver=resolver) as r:
        yield r


def temp_name() -> str:
    return TEMP_PREFIX + secrets.token_hex(8)


def names(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


# A second process of ours in the middle of a write: it holds flock(LOCK_EX) on its temp
# file (as Root's writers do) until told to stop on stdin.
HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"half of a note")
    print("holding", flush=True)
    sys.stdin.read()
    """
)


def test_sweep_removes_a_stale_temp_but_never_one_a_live_writer_holds(root: Root, ws: Path) -> None:
    stale = ws / temp_name()
    stale.write_text("a full copy of a note the person may delete later")
    live = ws / temp_name()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(live)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        assert root.remove_stale_temps(()) == 1
        assert names(ws) == [live.name]
        assert root.remove_stale_temps(()) == 0  # still held: still kept
        assert live.read_text() == "half of a note"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    assert root.remove_stale_temps(()) == 1  # its writer is gone: now it is stale
    assert names(ws) == []


def test_sweep_touches_only_our_exact_names_and_never_follows_a_link(
    root: Root, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("outside")
    hexpart = secrets.token_hex(8)
    kept_files = [
        ".fsnotes-tmp-short",
        TEMP_PREFIX + hexpart.upper(),
        TEMP_PREFIX + hexpart + ".md",
        TEMP_PREFIX + hexpart + "0",
        "x" + TEMP_PREFIX + hexpart,
        REMOVE_PREFIX + hexpart,  # an older version's remove name: no inode to check
        "note.md",
    ]
    for name in kept_files:
        (ws / name).write_text(name)
    (ws / temp_name()).symlink_to(outside)
    (ws / temp_name()).symlink_to(ws / "note.md")
    os.mkfifo(ws / temp_name())
    folder = ws / temp_name()
    folder.mkdir()
    (folder / "inside.md").write_text("in a directory with our name")
    before = names(ws)
    assert root.remove_stale_temps(()) == 0
    assert names(ws) == before
    assert outside.read_text() == "outside"
    for name in kept_files:
        assert (ws / name).read_text() == name


def test_sweep_removes_only_a_temp_name_never_the_note_it_is_linked_to(
    root: Root, ws: Path
) -> None:
    # What the link + unlink fallback leaves when killed between the two: the complete
    # note under both names. Only our name goes.
    (ws / "note.md").write_text("the note")
    os.link(ws / "note.md", ws / temp_name())
    assert root.remove_stale_temps(()) == 1
    assert names(ws) == ["note.md"]
    assert (ws / "note.md").read_text() == "the note"
    assert (ws / "note.md").stat().st_nlink == 1


def test_sweep_works_in_the_named_folder_only(root: Root, ws: Path) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    for folder in (ws, ws / "a", ws / "a" / "b"):
        (folder / temp_name()).write_text("stale")
    assert root.remove_stale_temps(("a",)) == 1
    assert len(names(ws / "a")) == 1  # only b is left there
    assert len(names(ws / "a" / "b")) == 1
    assert len(names(ws)) == 2


def test_a_write_sweeps_its_own_folder_at_most_once_per_interval(
    root: Root, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "f").mkdir()
    first = ws / "f" / temp_name()
    first.write_text("stale")
    elsewhere = ws / temp_name()
    elsewhere.write_text("stale, in another folder")
    root.create(("f", "one.md"), b"1")
    assert names(ws / "f") == ["one.md"]
    assert elsewhere.exists()  # a write only sweeps the folder it writes in
    second = ws / "f" / temp_name()
    second.write_text("stale")
    root.replace(("f", "one.md"), b"2", max_bytes=10)
    assert second.exists()  # swept less than SWEEP_INTERVAL_S ago: not again yet
    monkeypatch.setattr(sandbox_root, "SWEEP_INTERVAL_S", 0.0)
    root.replace(("f", "one.md"), b"3", max_bytes=10)
    assert names(ws / "f") == ["one.md"]
    assert (ws / "f" / "one.md").read_bytes() == b"3"


def test_a_killed_deletes_leftover_goes_but_an_object_left_on_purpose_stays(
    root: Root, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The names remove() gives: the confirmed file's inode number rides in the name.
    confirmed = ws / "confirmed.md"
    confirmed.write_text("the person confirmed deleting this")
    killed = ws / f"{REMOVE_PREFIX}{secrets.token_hex(8)}-{confirmed.stat().st_ino:x}"
    confirmed.rename(killed)  # what a kill between hiding and unlinking leaves
    other = ws / "other.md"
    other.write_text("swapped in: NOT the confirmed file")
    left = ws / f"{REMOVE_PREFIX}{secrets.token_hex(8)}-{other.stat().st_ino + 1:x}"
    other.rename(left)  # what remove() leaves when the original name was taken again
    assert is_leftover_name(killed.name) and is_leftover_name(left.name)
    # Fresh: a delete in another process may still be about to unlink it itself.
    assert root.remove_stale_temps(()) == 0
    monkeypatch.setattr(sandbox_root, "REMOVE_GRACE_S", 0.0)
    assert root.remove_stale_temps(()) == 1
    assert names(ws) == [left.name]
    assert left.read_text() == "swapped in: NOT the confirmed file"


# A real racer for remove(): it recreates the note's name whenever it is absent, so that a
# refused delete cannot put the object back and must leave it under its hidden name.
RETAKER = textwrap.dedent(
    """
    import os, sys
    path = sys.argv[1]
    print("go", flush=True)
    while not os.path.exists(path + ".stop"):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            pass
    """
)


def test_an_object_a_refused_delete_leaves_hidden_is_never_swept(
    root: Root, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_root, "REMOVE_GRACE_S", 0.0)
    note = ws / "n.md"
    racer = subprocess.Popen(
        [sys.executable, "-c", RETAKER, str(note)], stdout=subprocess.PIPE, text=True
    )
    left: list[str] = []
    try:
        assert racer.stdout is not None and racer.stdout.readline() == "go\n"
        deadline = time.monotonic() + 5
        while not left and time.monotonic() < deadline:
            try:
                current = root.stat(("n.md",))
            except Exception:
                continue
            wrong = type(current.identity)(current.identity.dev, current.identity.ino + 1)
            try:
                root.remove(("n.md",), wrong)
            except IdentityMismatch as exc:
                if "left as" in str(exc):
                    left.append(str(exc))
            except Exception:
                continue
    finally:
        (ws / "n.md.stop").touch()
        racer.wait(10)
    if not left:
        pytest.skip("the racer never retook the name in time (timing); nothing to check")
    hidden = [n for n in names(ws) if n.startswith(REMOVE_PREFIX)]
    assert hidden and all(is_leftover_name(n) for n in hidden)
    assert root.remove_stale_temps(()) == 0
    assert [n for n in names(ws) if n.startswith(REMOVE_PREFIX)] == hidden


# A sweeper in another process, as fast as it can go, while this one writes.
SWEEPER = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[2])
    from sandbox.root import Root
    root = Root.open(sys.argv[1])
    stop = sys.argv[1] + "/../stop"
    sweeps = 0
    print("go", flush=True)
    while not os.path.exists(stop):
        root.remove_stale_temps(())
        sweeps += 1
    print(sweeps, flush=True)
    """
)


def test_sweepers_racing_writers_never_break_a_write(
    root: Root, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_root, "SWEEP_INTERVAL_S", 0.0)  # writers sweep too, every time
    sweeper = subprocess.Popen(
        [sys.executable, "-c", SWEEPER, str(ws), str(REPO)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    errors: list[BaseException] = []
    writes = [0, 0]

    def writer(k: int) -> None:
        data = bytes([k]) * 200_000
        end = time.monotonic() + 1.5
        i = 0
        try:
            while time.monotonic() < end:
                root.create((f"w{k}-{i}.md",), data)
                root.replace((f"w{k}-{i}.md",), data[::-1] + b"!", max_bytes=len(data) + 1)
                i += 1
                writes[k] += 2
        except BaseException as exc:  # any failure of a write is the bug
            errors.append(exc)

    try:
        assert sweeper.stdout is not None and sweeper.stdout.readline() == "go\n"
        threads = [threading.Thread(target=writer, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        (tmp_path / "stop").touch()
        sweeper.wait(30)
    assert sweeper.stdout is not None
    sweeps = int(sweeper.stdout.read())
    assert not errors, errors[:3]
    assert sweeps > 100 and sum(writes) > 20
    for p in ws.iterdir():
        assert not p.name.startswith("."), p.name
        k = int(p.name[1])
        assert p.read_bytes() == (bytes([k]) * 200_000)[::-1] + b"!"


def test_an_update_sweeps_first_so_a_cut_short_link_fallback_does_not_block_it(
    root: Root, ws: Path
) -> None:
    # A create killed between link and unlink (no renameat2) leaves the note with a second
    # name of ours; the note then looks hard-linked, which update refuses. The update's own
    # sweep of the folder runs first and removes that name.
    (ws / "note.md").write_text("v1")
    os.link(ws / "note.md", ws / temp_name())
    root.replace(("note.md",), b"v2", max_bytes=10)
    assert names(ws) == ["note.md"]
    assert (ws / "note.md").read_bytes() == b"v2"
