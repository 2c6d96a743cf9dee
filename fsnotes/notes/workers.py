"""Extra threads for one blocking step, taken from the limiter every blocking step shares.

A handler's blocking step runs in one of anyio's worker threads, and anyio's default thread
limiter bounds how many run at once (``MAX_WORKER_THREADS``, set by the transport). A step
that wants a few more threads (a move rewriting its linking notes, an index build reading
ahead of its writes) takes each from that limiter, without waiting: as many as are free, up
to what it wants, and none when every token is taken, in which case it does the work in its
own thread. So the bound holds for every thread that runs a step, and a step never waits for
a token another step holds (which could deadlock them both).

Outside an anyio worker thread (the command line, a test calling the code directly) there is
no shared limiter and the step gets what it asks for. Inside a borrowed thread the step gets
none: nested work runs in the thread that already holds its token.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import anyio
import anyio.from_thread
import anyio.to_thread

__all__ = ["borrowed_pool"]

_local = threading.local()


def _mark_borrowed() -> None:
    _local.borrowed = True


@contextlib.contextmanager
def borrowed_pool(wanted: int, name: str) -> Iterator[ThreadPoolExecutor | None]:
    """A pool of at most ``wanted`` threads (named ``name``) for the step running in this
    thread, each holding a token of anyio's default limiter until the pool is shut down;
    ``None`` when no token is free (do the work in this thread). The pool is shut down, and
    the tokens given back, when the block ends."""
    if wanted < 1 or getattr(_local, "borrowed", False):
        yield None
        return
    borrowers: list[object] = []

    def take() -> anyio.CapacityLimiter:
        # In the event loop's thread: the limiter is not thread-safe.
        limiter = anyio.to_thread.current_default_thread_limiter()
        for _ in range(wanted):
            borrower = object()
            try:
                limiter.acquire_on_behalf_of_nowait(borrower)
            except anyio.WouldBlock:
                break
            borrowers.append(borrower)
        return limiter

    try:
        limiter: anyio.CapacityLimiter | None = anyio.from_thread.run_sync(take)
        granted = len(borrowers)
    except RuntimeError:  # not in an anyio worker thread: no limiter to share
        limiter, granted = None, wanted
    if granted == 0:
        yield None
        return

    def give_back() -> None:
        assert limiter is not None
        for borrower in borrowers:
            limiter.release_on_behalf_of(borrower)

    try:
        with ThreadPoolExecutor(granted, name, initializer=_mark_borrowed) as pool:
            yield pool
    finally:
        if limiter is not None:
            # The loop may have ended meanwhile (a step abandoned on cancel): nothing to give
            # the tokens back to then.
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(give_back)
