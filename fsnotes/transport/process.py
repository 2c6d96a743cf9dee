"""What a serving process sets up once, whichever transport it serves: stderr logging, the
worker-thread pool's size, and glibc's handling of freed large blocks."""

from __future__ import annotations

import ctypes
import logging
import os
import sys

import anyio.to_thread

__all__ = [
    "MALLOC_MMAP_THRESHOLD",
    "MAX_WORKER_THREADS",
    "configure_logging",
    "limit_worker_threads",
    "return_freed_memory_promptly",
]

_log = logging.getLogger("fsnotes.transport")

# Most worker threads running at once (anyio's default limiter, which every handler's blocking
# step shares: note reads, SQLite, Markdown analysis). Each running step may hold a note several
# times over (a notes_read of a 4 MiB note holds 17 MiB while its Markdown is analysed, 40 MiB if
# the note holds an emoji), so the pool size multiplies what handlers hold. With anyio's default
# of 40, 64 reads of a 4 MiB note left unread peaked at +335 MiB (32 of a note with an emoji:
# +628 MiB); with 8, +148 MiB (+315 MiB), in the same CPU time: the work is GIL-bound, so more
# threads add no throughput on this 2-core machine. Python's own ThreadPoolExecutor defaults to
# cpu_count + 4 (6 here); 8 leaves room for the indexer's rescan and a slow SQLite step.
MAX_WORKER_THREADS = 8

# glibc's malloc serves a block of 128 KiB or more with mmap (given back to the system when freed),
# but each time such a block is freed it raises that threshold to the block's size (up to 32 MiB):
# after the first 10 MiB answer, answers come from the heaps, whose freed memory is mostly kept.
# 32 reads of a 4 MiB note left unread then held +170 MiB with 58 MiB of answers in use, and
# +100 MiB once all were read (peak +203 MiB). Setting the threshold (to its own default) turns
# that adjustment off, so freed answers and note copies go back at once: +53 MiB, then nothing
# (peak +146 MiB). The cost: each large buffer is fresh pages (an mmap and its page faults);
# those 32 reads took 11.8 s of CPU instead of 9.7 s. Small allocations are unaffected.
MALLOC_MMAP_THRESHOLD = 128 * 1024
_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


def limit_worker_threads() -> None:
    """At most :data:`MAX_WORKER_THREADS` blocking steps at once (call inside the event loop)."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = MAX_WORKER_THREADS


def configure_logging() -> None:
    """Logs on stderr at ``FSNOTES_LOG_LEVEL`` (default WARNING), unless something (the command
    line) configured logging already."""
    root = logging.getLogger()
    if not root.handlers:
        level = os.environ.get("FSNOTES_LOG_LEVEL", "WARNING").upper()
        logging.basicConfig(
            stream=sys.stderr,
            level=getattr(logging, level, logging.WARNING),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )


def return_freed_memory_promptly() -> None:
    """Fix glibc's mmap threshold (see :data:`MALLOC_MMAP_THRESHOLD`); elsewhere, nothing."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    if mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD) != 1:  # musl's is a stub returning 0
        _log.debug("mallopt(M_MMAP_THRESHOLD) is not supported here")
