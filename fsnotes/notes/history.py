"""Keeping what the notes tools replace: the notes side of the history store.

:meth:`History.keeping` wraps one change of one note. Inside it, the tool calls the
:class:`Keep` it was given with the bytes it is about to replace, *before* replacing them;
the copy is durable when that call returns, and if it cannot be made (the store is busy,
full or unusable) it raises :class:`HistoryUnavailable` and the tool changes nothing. When
the block ends the copy is settled; when it raises, the copy is kept only if the note no
longer holds those bytes (the change may have happened before the failure). The note's
writers' lock is held for the whole block, so a process killed inside it leaves a pending
copy that the next writer or reader of the note resolves the same way (see
:mod:`fsnotes.state.history_store`).

With history off (``--no-history``) :meth:`History.keeping` keeps nothing and takes no lock.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from fsnotes.notes.store import MAX_NOTE_BYTES, NoteStore, display, etag_of
from fsnotes.state.history_store import HistoryStore, HistoryUnavailable, Version
from sandbox import errors as sx
from sandbox.uri import Components

log = logging.getLogger("fsnotes.history")


__all__ = ["UNKNOWN", "History", "HistoryUnavailable", "Keep", "Version", "current_etag"]


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


# What a note holds when it cannot be told (an I/O or permission error): a pending copy is
# then left pending (and unlisted) rather than guessed about.
UNKNOWN: Final = _Unknown()
# What stands at a note's path when it is not a readable note (a symlink, a FIFO, a file too
# large): certainly not the kept bytes.
_OTHER = "other"


def current_etag(store: NoteStore, parts: Components) -> str | _Unknown | None:
    """The etag of the bytes at ``parts`` now, None when nothing is there."""
    try:
        return etag_of(store.root.read(parts, max_bytes=MAX_NOTE_BYTES).data)
    except (sx.NotFound, sx.NotADirectory):
        return None
    except (sx.NotARegularFile, sx.Escape, sx.TooLarge):
        return _OTHER
    except sx.SandboxError:
        return UNKNOWN


@dataclass
class Keep:
    """Called by a tool with the bytes it is about to replace (once per block)."""

    _store: HistoryStore | None
    _workspace: str
    _path: str
    _principal: str
    _tool: str
    version: int | None = field(default=None)  # the kept copy's id, once there is one

    def __call__(
        self, old: bytes, *, new: bytes | None = None, moved_to: str | None = None
    ) -> None:
        """Keep ``old`` durably before the change (nothing when ``new`` equals it: nothing
        is replaced). HistoryUnavailable when it cannot be kept."""
        if self._store is None or (new is not None and new == old):
            return
        self.version = self._store.add(
            self._workspace,
            self._path,
            old,
            principal=self._principal,
            tool=self._tool,
            moved_to=moved_to,
        )


class History:
    """What the notes tools keep of what they replace, or nothing (``History(None)``)."""

    def __init__(self, store: HistoryStore | None) -> None:
        self.store = store

    @classmethod
    def off(cls) -> History:
        return cls(None)

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    @contextlib.contextmanager
    def keeping(
        self,
        workspace: str,
        parts: Components,
        *,
        principal: str,
        tool: str,
        current: Callable[[], str | _Unknown | None],
    ) -> Iterator[Keep]:
        """One change of the note ``parts`` of ``workspace`` (its URI) by ``principal``
        with ``tool``; ``current`` tells what the note holds now (after a failure).
        HistoryUnavailable on entry when the writers' lock cannot be had."""
        store = self.store
        keep = Keep(store, workspace, display(parts), principal, tool)
        if store is None:
            yield keep
            return
        with store.writing(workspace, display(parts)):
            try:
                yield keep
            except BaseException:
                if keep.version is not None:
                    self._after_failure(store, keep.version, current)
                raise
            if keep.version is not None:
                try:
                    store.settle(keep.version)
                except HistoryUnavailable as exc:
                    # The change is made; the copy stays pending and is settled by the next
                    # look at this note (the note no longer holds the kept bytes).
                    log.warning("history version %d not settled: %s", keep.version, exc)

    @staticmethod
    def _after_failure(
        store: HistoryStore, vid: int, current: Callable[[], str | _Unknown | None]
    ) -> None:
        now = current()
        if isinstance(now, _Unknown):
            return  # left pending: decided when the note can be read again
        try:
            store.resolve_one(vid, now)
        except HistoryUnavailable as exc:
            log.warning("history version %d not resolved: %s", vid, exc)

    def tidy(self) -> None:
        """Prune the versions past the age bound, if there are any and no writer is busy:
        so that they go even while nothing is changed (adding a version prunes too)."""
        history = self.store
        if history is None or not history.has_expired():
            return
        with history.writing_if_free() as held:
            if held:
                history.prune()

    def resolve(self, workspace: str, store: NoteStore, parts: Components) -> None:
        """Decide the note's pending copies left by killed processes, if any and if no
        writer is busy right now (they stay unlisted otherwise)."""
        history = self.store
        if history is None or not history.has_pending(workspace, display(parts)):
            return
        with history.writing_if_free(workspace, display(parts)) as held:
            if not held:
                return
            now = current_etag(store, parts)
            if not isinstance(now, _Unknown):
                history.resolve(workspace, display(parts), now)
