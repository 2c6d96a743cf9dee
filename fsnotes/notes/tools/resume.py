"""Finishing a move that was interrupted: a server killed during a ``notes_move``'s link
update leaves the note at its new path, some notes rewritten and some not, and the move's
row in the move journal (:mod:`fsnotes.state.moves`). The same move called again (the same
note URI, the same new path) finds that row and finishes the job from the plan recorded
before the rename (:func:`fsnotes.notes.tools.relink.resume_plan`):

- the moved note's own links are rewritten only if the journal does not say they were and
  the note still has the etag it had before the move (so never shifted a second time);
- a note to rewrite whose etag is still the one planned was not reached: rewritten exactly
  as the killed run would have; one whose etag changed was rewritten already (or edited
  since): only its links that do not name the moved note now are considered;
- the journal row goes once the rewrite ran to its end (skips included).

The retry is authorized as any move of that note (write access to its workspace), whoever
began the move. Without a row, a move whose note is gone is the usual error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fsnotes.notes.store import NoteError, display
from fsnotes.notes.tools import relink
from fsnotes.notes.tools.errors import ServiceError, explain
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.models import MoveResult
from fsnotes.notes.tools.service import Notes
from fsnotes.security.grants import Access
from fsnotes.state.moves import MoveJournalError
from sandbox import errors as sx

log = logging.getLogger("fsnotes.notes")


def interrupted_move(notes: Notes, uri: str, new_path: str) -> relink.MovePlan | None:
    """The plan of this move if it began and was interrupted: the note is gone from
    ``uri``, a note is at ``new_path``, and the move journal holds that move. ``None``
    otherwise (an ordinary move). Authorized as any move of ``uri``."""
    loc = notes.locate(uri, Access.WRITE)
    dst = notes.relative(loc.workspace, new_path)
    if notes.moves is None or dst.parts == loc.parts:
        return None
    if _exists(loc) or not _exists(dst):
        return None
    try:
        entry = notes.moves.find(loc.workspace.name, display(loc.parts), display(dst.parts))
    except MoveJournalError as exc:
        raise ServiceError(f"Nothing was changed: {exc}.") from None
    if entry is None:
        return None
    plan = relink.resume_plan(loc.parts, dst.parts, entry.plan)
    plan.own_done = entry.own_done
    return plan


def _exists(loc: Located) -> bool:
    try:
        return loc.store.root.stat(loc.parts).kind == "file"
    except sx.NotFound:
        return False
    except sx.SandboxError as exc:
        raise ServiceError(explain(exc, loc.parts)) from None


def finish_move(
    notes: Notes,
    uri: str,
    new_path: str,
    plan: relink.MovePlan,
    *,
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> MoveResult:
    """Finish the interrupted move ``plan`` (from :func:`interrupted_move`; see the
    module docstring)."""
    loc = notes.locate(uri, Access.WRITE)
    dst = notes.relative(loc.workspace, new_path)
    log.info("finishing the interrupted move of %s to %s", display(loc.parts), new_path)
    updated, skipped = notes.relink_moved(loc, dst, plan, progress, stop, resuming=True)
    etag = next((u.etag for u in updated if u.uri == dst.uri), None)
    if etag is None:
        try:
            etag = loc.store.read(dst.parts).etag
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, dst.parts)) from None
    return MoveResult(
        uri=dst.uri,
        path=display(dst.parts),
        previousUri=loc.uri,
        etag=etag,
        linksUpdated=updated,
        linksNotUpdated=skipped,
        resumed=True,
    )


__all__ = ["finish_move", "interrupted_move"]
