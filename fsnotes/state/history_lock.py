"""The history store's writers' lock: held from a note's copy to its settle.

Whoever holds a note's lock is the only writer of that note, so a *pending* version seen
under it belongs to a process that died (see :mod:`fsnotes.state.history_store`). Two
forms, one per backend:

- **The state directory** (SQLite): one file lock (``history.lock``, ``flock``) for the
  whole store, shared by the processes on that machine: writers of any note take turns.
- **PostgreSQL** (several instances): one session-level advisory lock per note, so that
  changes of different notes by different instances run side by side, plus a shared lock
  on the whole store that every note writer holds and that :meth:`NoteLocks.hold` of the
  whole store (``note=None``) takes alone. They are the writer's own session's: an
  instance that dies, or whose session the server ends, releases them with it.

``note`` is ``(workspace URI, path)``; ``None`` means the whole store (no note written
meanwhile by anyone).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fsnotes.state import statedir

if TYPE_CHECKING:
    from fsnotes.state.postgres import PgDB

Note = tuple[str, str]

LOCK_NAME = "history.lock"
# The advisory-lock name of the whole store; a note's is this and a digest of its URI.
STORE_LOCK = "history-writers"


class WritersLock(Protocol):
    def hold(self, note: Note | None, timeout: float) -> contextlib.AbstractContextManager[None]:
        """Held for the block; the store's "busy, try again" error past ``timeout``."""
        ...

    def hold_if_free(self, note: Note | None) -> contextlib.AbstractContextManager[bool]:
        """Held for the block if no one holds it right now (True), else False at once."""
        ...


class FileLock:
    """The state directory's one lock file (every process on the machine, every note)."""

    def __init__(self, state_dir: Path, error: Callable[[str], Exception]) -> None:
        self._path = state_dir / LOCK_NAME
        self._error = error
        try:
            statedir.private_file(self._path)  # a link there stops start-up too
        except statedir.StateFileError as exc:
            raise error(f"cannot be used ({exc})") from None

    @contextlib.contextmanager
    def hold(self, note: Note | None, timeout: float) -> Iterator[None]:
        try:
            with statedir.exclusive(
                self._path,
                timeout=timeout,
                held_by_other="another fsnotes process has been keeping a copy",
            ):
                yield
        except statedir.SetupLockTimeout as exc:
            raise self._error(f"is busy ({exc}); try again shortly") from None
        except statedir.StateFileError as exc:
            raise self._error(f"cannot be used ({exc})") from None

    @contextlib.contextmanager
    def hold_if_free(self, note: Note | None) -> Iterator[bool]:
        try:
            with statedir.exclusive_or_none(self._path) as held:
                yield held
        except statedir.StateFileError as exc:
            raise self._error(f"cannot be used ({exc})") from None


def note_lock_name(note: Note) -> str:
    workspace, path = note
    digest = hashlib.sha256(f"{workspace}\n{path}".encode()).hexdigest()
    return f"{STORE_LOCK}:{digest}"


class NoteLocks:
    """PostgreSQL's advisory locks, one per note (see the module). The wait is the
    session's lock timeout (:data:`fsnotes.state.postgres.LOCK_WAIT_S`, 10 s, as the file
    lock's), not ``timeout``: one setting for every lock an instance waits for."""

    def __init__(self, db: PgDB) -> None:
        self._db = db

    @staticmethod
    def _locks(note: Note | None) -> list[tuple[str, bool]]:
        """(name, shared): the whole store's first, then the note's."""
        if note is None:
            return [(STORE_LOCK, False)]
        return [(STORE_LOCK, True), (note_lock_name(note), False)]

    @contextlib.contextmanager
    def hold(self, note: Note | None, timeout: float) -> Iterator[None]:
        with self._db.holding(self._locks(note), wait=True):
            yield

    @contextlib.contextmanager
    def hold_if_free(self, note: Note | None) -> Iterator[bool]:
        with self._db.holding(self._locks(note), wait=False) as held:
            yield held
