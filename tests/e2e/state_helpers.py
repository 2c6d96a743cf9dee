"""State-directory trouble made real: another process's lock, a corrupted database, a fresh
thread, and the real CLI with short lock waits.

:func:`held` is a second process holding a lock on a state-directory file, as another
fsnotes (or a ``sqlite3`` shell) would: plain ``sqlite3`` or ``flock``, no fsnotes code.

Modes: ``immediate`` (``BEGIN IMMEDIATE``: the write lock; readers still read in WAL mode),
``exclusive`` (``locking_mode=EXCLUSIVE`` and ``BEGIN EXCLUSIVE``: nobody else can even open
the database; only obtainable while no other connection has it open) and ``flock`` (an
exclusive ``flock`` on the file). The lock is held until the context exits.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_HOLDER = r"""
import fcntl, os, sqlite3, sys
path, mode = sys.argv[1], sys.argv[2]
if mode == "flock":
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
else:
    db = sqlite3.connect(path, isolation_level=None, timeout=10)
    if mode == "exclusive":
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
        db.execute("BEGIN EXCLUSIVE")
        db.execute("CREATE TABLE IF NOT EXISTS holder (x)")
    else:
        db.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
"""
READY_TIMEOUT_S = 10.0

# The real CLI (``python -c SHORT_WAITS serve ...``) with the stores' lock waits cut to a
# fraction of a second, so a lock held by another process fails quickly, not after the real
# LOCK_TIMEOUT_S.
SHORT_WAIT_S = 0.3
SHORT_WAITS = (
    "import sys\n"
    "from fsnotes.state import history_store, replay\n"
    "from fsnotes.setup import store\n"
    f"replay.LOCK_TIMEOUT_S = store.LOCK_TIMEOUT_S = {SHORT_WAIT_S}\n"
    f"history_store.LOCK_TIMEOUT_S = {SHORT_WAIT_S}\n"
    "from fsnotes.app.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
SHORT_WAITS_LAUNCHER = [sys.executable, "-c", SHORT_WAITS]


@contextmanager
def held(path: Path, mode: str) -> Iterator[None]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line.strip() == "held", proc.stderr.read() if proc.stderr else line
        yield
    finally:
        proc.stdin.close()
        proc.wait(READY_TIMEOUT_S)


def in_fresh_thread(call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a new thread (its first store call opens a new connection, as a new
    worker thread's does at run time); returns what it raised, if anything."""
    box: list[BaseException | None] = [None]

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            box[0] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return box[0]


def corrupt(path: Path) -> None:
    """Overwrite a live WAL database's main file with junk, as a disk fault or a stray write
    would: its log is checkpointed first, so every page is read from the junk from then on."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(path, "r+b") as f:
        f.write(b"this is not a database\n" * 200)
