"""Races: a second process swaps names for symlinks to outside while Root works on them.

A forked process exchanges a real directory (or file) with a symlink to the outside
directory (or file) using ``renameat2(RENAME_EXCHANGE)`` in a tight loop, so every lookup
may see either. Root must never return outside content nor create or change anything
outside, under both resolvers. The same race run against ``tests/sandbox/naive.py``
(realpath, then open by name) must escape, which shows the harness is able to catch an
escape.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import cast

import naive  # beside this file: pytest puts tests/sandbox/ on sys.path
import pytest

from sandbox import _linux
from sandbox.errors import SandboxError
from sandbox.root import Resolver, Root, openat2_available

pytestmark = pytest.mark.race

INSIDE = b"inside\n"
SECRET = b"SECRET: outside the workspace\n"
# Each Root race runs this long: tens of thousands of swaps and thousands of operations.
RACE_SECONDS = 2.0
# The naive implementation escapes within milliseconds in practice (thousands of times in
# 2 s in the measurements); the deadline only bounds a pathological scheduler.
NAIVE_DEADLINE_SECONDS = 5.0
# Swaps per check of the stop flag (a semaphore round trip) in the swapper process.
SWAP_BATCH = 256
MIN_OPERATIONS = 1000


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> Resolver:
    if request.param == "openat2" and not openat2_available():
        pytest.skip("openat2 is not usable on this kernel/seccomp profile")
    return cast(Resolver, request.param)


def _swap_loop(
    dirpath: str,
    a: str,
    b: str,
    link_target: str,
    stop: Event,
    swaps: Synchronized,  # type: ignore[type-arg]
) -> None:
    dfd = os.open(dirpath, os.O_PATH | os.O_DIRECTORY)
    done = 0
    while not stop.is_set():
        for _ in range(SWAP_BATCH):
            with contextlib.suppress(OSError):
                _linux.renameat2(dfd, a, dfd, b, _linux.RENAME_EXCHANGE)
                done += 1
        # An atomic replace that lands in the microseconds after a swap replaces the symlink
        # itself (never its target) and leaves two regular names; re-arm the trap.
        if not (
            os.path.islink(os.path.join(dirpath, a)) or os.path.islink(os.path.join(dirpath, b))
        ):
            with contextlib.suppress(OSError):
                os.unlink(b, dir_fd=dfd)
                os.symlink(link_target, b, dir_fd=dfd)
        swaps.value = done
    os.close(dfd)


@contextlib.contextmanager
def swapping(dirpath: Path, a: str, b: str, link_target: Path) -> Iterator[Synchronized]:  # type: ignore[type-arg]
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    swaps = ctx.Value("q", 0)
    proc = ctx.Process(
        target=_swap_loop, args=(str(dirpath), a, b, str(link_target), stop, swaps), daemon=True
    )
    proc.start()
    try:
        deadline = time.monotonic() + 10
        while swaps.value == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert swaps.value > 0, "the swapper never ran"
        yield swaps
    finally:
        stop.set()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()


@dataclass
class Tally:
    ok: int = 0
    refused: int = 0
    escapes: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.refused


def snapshot(path: Path) -> dict[str, tuple[bytes, int, int]]:
    out = {}
    for p in sorted(path.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(path))] = (
            p.read_bytes() if p.is_file() else b"",
            st.st_ino,
            st.st_mtime_ns,
        )
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_bytes(SECRET)
    (out / "outside-marker").write_bytes(SECRET)
    return out


@pytest.fixture
def dir_race(tmp_path: Path, outside: Path) -> Path:
    """ws/sub (a real directory) and ws/evil (a symlink to outside), to be exchanged."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "secret.txt").write_bytes(INSIDE)
    (ws / "sub" / "inside-marker").write_bytes(INSIDE)
    os.symlink(outside, ws / "evil")
    return ws


@pytest.fixture
def file_race(tmp_path: Path, outside: Path) -> Path:
    """ws/note.md (a real file) and ws/evil.md (a symlink to the outside secret)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "note.md").write_bytes(INSIDE)
    os.symlink(outside / "secret.txt", ws / "evil.md")
    return ws


def test_directory_swapped_for_symlink_never_leaks(
    dir_race: Path, outside: Path, resolver: Resolver
) -> None:
    before = snapshot(outside)
    tally = Tally()
    with (
        Root.open(dir_race, resolver=resolver) as root,
        swapping(dir_race, "sub", "evil", outside) as swaps,
    ):
        deadline = time.monotonic() + RACE_SECONDS
        i = 0
        while time.monotonic() < deadline:
            i += 1
            try:
                kind = i % 10
                if kind < 5:
                    if root.read(("sub", "secret.txt"), max_bytes=1000).data != INSIDE:
                        tally.escapes += 1
                elif kind < 8:
                    names = {e.name for e in root.listdir(("sub",))}
                    if "outside-marker" in names:
                        tally.escapes += 1
                elif kind == 8:
                    root.create(("sub", f"new-{i}.md"), b"x")
                else:
                    root.replace(("sub", "secret.txt"), INSIDE, max_bytes=1000)
                tally.ok += 1
            except SandboxError:
                tally.refused += 1
        swapped = swaps.value
    print(f"directory race [{resolver}]: {tally}, {swapped} swaps")
    assert tally.escapes == 0
    assert snapshot(outside) == before, "something outside was created or changed"
    assert tally.total >= MIN_OPERATIONS, tally
    assert tally.ok > 0 and tally.refused > 0, f"the race was not live: {tally}"


def test_file_swapped_for_symlink_never_leaks(
    file_race: Path, outside: Path, resolver: Resolver
) -> None:
    before = snapshot(outside)
    tally = Tally()
    with (
        Root.open(file_race, resolver=resolver) as root,
        swapping(file_race, "note.md", "evil.md", outside / "secret.txt") as swaps,
    ):
        deadline = time.monotonic() + RACE_SECONDS
        i = 0
        while time.monotonic() < deadline:
            i += 1
            try:
                if i % 8:
                    if root.read(("note.md",), max_bytes=1000).data != INSIDE:
                        tally.escapes += 1
                else:
                    root.replace(("note.md",), INSIDE, max_bytes=1000)
                tally.ok += 1
            except SandboxError:
                tally.refused += 1
        print(f"file race [{resolver}]: {tally}, {swaps.value} swaps")
    assert tally.escapes == 0
    assert snapshot(outside) == before, "the outside file was changed"
    assert tally.total >= MIN_OPERATIONS, tally
    assert tally.ok > 0 and tally.refused > 0, f"the race was not live: {tally}"


def _naive_escapes(ws: Path, rel: str) -> int:
    escapes = attempts = 0
    deadline = time.monotonic() + NAIVE_DEADLINE_SECONDS
    while time.monotonic() < deadline and escapes == 0:
        for _ in range(100):
            attempts += 1
            try:
                if naive.read(str(ws), rel) == SECRET:
                    escapes += 1
            except OSError:
                pass
    print(f"naive {rel}: escaped after {attempts} attempts")
    return escapes


def test_naive_realpath_then_open_escapes_through_swapped_directory(
    dir_race: Path, outside: Path
) -> None:
    with swapping(dir_race, "sub", "evil", outside):
        assert _naive_escapes(dir_race, "sub/secret.txt") > 0


def test_naive_realpath_then_open_escapes_through_swapped_file(
    file_race: Path, outside: Path
) -> None:
    with swapping(file_race, "note.md", "evil.md", outside / "secret.txt"):
        assert _naive_escapes(file_race, "note.md") > 0
