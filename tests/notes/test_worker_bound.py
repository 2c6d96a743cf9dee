"""The bound on blocking steps holds inside a step too: the extra threads a move's link
rewrites and an index build's reader run on are taken from anyio's default thread limiter
(the one every blocking step shares), never added beside it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import anyio.to_thread
import pytest

from fsnotes.app.server import Server
from fsnotes.notes.tools import relink
from fsnotes.notes.workers import borrowed_pool

LINKERS = 3 * relink.REWRITE_WORKERS


@contextmanager
def threads_started() -> Iterator[list[str]]:
    """The names of the threads the threading module starts meanwhile (threading.settrace
    runs its function once at the start of each new thread)."""
    names: list[str] = []

    def started(_frame: FrameType, _event: str, _arg: Any) -> None:
        names.append(threading.current_thread().name)
        sys.settrace(None)  # once per thread: nothing more of it is traced

    threading.settrace(started)
    try:
        yield names
    finally:
        threading.settrace(None)  # type: ignore[arg-type]


def in_a_step_with(free: int, work: Callable[[], Any]) -> Any:
    """``work`` as a blocking step while ``free`` more tokens of the limiter are free, and one
    is held by another step that waits meanwhile; every token is given back after."""

    async def main() -> Any:
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = 2 + free
        release = threading.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, release.wait)
            while limiter.borrowed_tokens < 1:
                await anyio.sleep(0.001)
            try:
                result = await anyio.to_thread.run_sync(work)
            finally:
                release.set()
        assert limiter.borrowed_tokens == 0
        return result

    return anyio.run(main)


@pytest.mark.parametrize("free", [0, 2])
def test_a_moves_link_rewrites_take_their_threads_from_the_limiter(
    server: Server, vault: Path, free: int
) -> None:
    for i in range(LINKERS):
        (vault / f"linker-{i:02}.md").write_text(f"# Linker {i}\n\nSee [[Budget]].\n")
    notes = server.service.acting_for(server.config.principal)
    source = (vault / "projects" / "budget.md").as_uri()
    with threads_started() as names:
        moved = in_a_step_with(free, lambda: notes.notes_move(source, "money.md", None))
    rewriters = [n for n in names if n.startswith("fsnotes-relink")]
    assert len(rewriters) == min(free, relink.REWRITE_WORKERS)  # as many as were free
    assert len(moved.linksUpdated) == LINKERS + 1  # and projects/plan.md
    for i in range(LINKERS):
        assert (vault / f"linker-{i:02}.md").read_text() == f"# Linker {i}\n\nSee [[money]].\n"


@pytest.mark.parametrize("free", [0, 1])
def test_an_index_builds_reader_takes_its_thread_from_the_limiter(
    server: Server, vault: Path, free: int
) -> None:
    for i in range(50):
        (vault / "bulk" / f"n{i:02}.md").parent.mkdir(exist_ok=True)
        (vault / "bulk" / f"n{i:02}.md").write_text(f"# Note {i}\n\nword{i}\n")
    [catalog] = server.catalogs.current()
    with threads_started() as names:
        report = in_a_step_with(free, catalog.rescan)
    readers = [n for n in names if n.startswith("fsnotes-scan")]
    assert len(readers) == free
    assert report is not None and report.indexed >= 50 and not report.cancelled


def test_outside_a_worker_thread_a_step_gets_the_threads_it_asks_for() -> None:
    together = threading.Barrier(3, timeout=10)  # broken unless three run at once
    with borrowed_pool(3, "fsnotes-test") as pool:
        assert pool is not None
        waits = [pool.submit(together.wait) for _ in range(3)]
        assert sorted(w.result() for w in waits) == [0, 1, 2]


def test_a_borrowed_thread_borrows_no_more_and_a_full_limiter_lends_none() -> None:
    def nested() -> bool:
        with borrowed_pool(2, "fsnotes-test-inner") as inner:
            return inner is None

    with borrowed_pool(1, "fsnotes-test") as pool:
        assert pool is not None and pool.submit(nested).result()

    def lent() -> bool:
        with borrowed_pool(4, "fsnotes-test") as pool:
            return pool is not None

    assert in_a_step_with(0, lent) is False
