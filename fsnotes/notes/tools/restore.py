"""``notes_history`` and ``notes_restore``: a note's kept versions, and bringing one back.

A note's versions are found by its URI (the workspace and the path), so a note that was
deleted or moved away keeps its history under the URI it had. Listing needs read access;
restoring needs write access, whether it replaces a note or re-creates a deleted one.

A version number names one version of one note wherever it is asked (numbers are made of
the time and chance, not counted per store, and with a shared database every instance reads
the same store), and the bytes written are
checked against that version's SHA-256 first: a restore writes exactly the version the
caller was shown, or nothing.

A restore is a normal write. Over an existing note it is an etag-checked update (the etag
is required: restoring never replaces a note nobody looked at), and what it replaces is kept
as a version of its own, so a restore can be undone like any update. Where no note exists it
is a create, which never replaces anything (a note created there meanwhile is kept, and the
restore refused).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fsnotes.notes.store import NoteError, display
from fsnotes.notes.tools.errors import ServiceError, explain
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.models import (
    DEFAULT_HISTORY_LIMIT,
    MAX_HISTORY_LIMIT,
    HistoryVersion,
    NotesHistoryResult,
    NotesRestoreResult,
)
from fsnotes.notes.tools.service import Notes
from fsnotes.security.grants import Access
from fsnotes.state.history_store import HistoryStore, HistoryUnavailable, Version
from sandbox import errors as sx

HISTORY_OFF = (
    "This server keeps no history of notes (it was started with --no-history), so there are "
    "no versions to list or restore."
)


def notes_history(notes: Notes, uri: str, limit: int | None) -> NotesHistoryResult:
    store = _store(notes)
    loc = notes.locate(uri, Access.READ)
    _check(loc)
    path = display(loc.parts)
    try:
        notes.history.resolve(loc.workspace.uri, loc.store, loc.parts)
        notes.history.tidy()
        versions, total = store.versions(
            loc.workspace.uri, path, min(limit or DEFAULT_HISTORY_LIMIT, MAX_HISTORY_LIMIT)
        )
    except HistoryUnavailable as exc:
        raise ServiceError(f"The history cannot be read: {exc}.") from None
    exists, etag = _now(loc)
    return NotesHistoryResult(
        uri=loc.uri,
        path=path,
        exists=exists,
        currentEtag=etag,
        versions=[_out(v) for v in versions],
        total=total,
    )


def notes_restore(notes: Notes, uri: str, version: int, etag: str | None) -> NotesRestoreResult:
    store = _store(notes)
    loc = notes.locate(uri, Access.WRITE)
    _check(loc)
    path = display(loc.parts)
    try:
        notes.history.resolve(loc.workspace.uri, loc.store, loc.parts)
        found = store.version(loc.workspace.uri, path, version)
        if found is None:
            raise ServiceError(
                f"'{path}' has no version {version}: no such version is kept for this note; "
                "list its versions with notes_history. Nothing was written."
            )
        data = store.content(found)  # checked against the version's SHA-256
    except HistoryUnavailable as exc:
        raise ServiceError(f"Nothing was restored: {exc}.") from None
    text = data.decode("utf-8")  # it was a note: strict UTF-8, checked when it was read
    kept: int | None = None
    if etag is None:
        try:
            new_etag, info = loc.store.create(loc.parts, text)
        except sx.AlreadyExists:
            raise ServiceError(
                f"'{path}' exists, and restoring never replaces a note without its current "
                f"etag: pass etag (currentEtag from notes_history) to replace it with version "
                f"{version}. Nothing was written."
            ) from None
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None
    else:
        try:
            with notes.keeping(loc, "notes_restore") as keep:
                new_etag, info = loc.store.update(
                    loc.parts, lambda _current: text, expect_etag=etag, keep=keep
                )
        except (sx.NotFound, sx.NotADirectory):
            raise ServiceError(
                f"'{path}' does not exist any more, so the etag you passed matches nothing; "
                "call notes_restore again without etag to re-create it. Nothing was written."
            ) from None
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None
        except HistoryUnavailable as exc:
            raise ServiceError(f"Nothing was restored: {exc}.") from None
        kept = keep.version
    notes.after_write(loc, lambda c: c.wrote(loc.parts, text, new_etag, info))
    return NotesRestoreResult(
        uri=loc.uri,
        path=path,
        etag=new_etag,
        size=info.size,
        restored=version,
        created=etag is None,
        keptVersion=kept,
    )


def _store(notes: Notes) -> HistoryStore:
    if notes.history.store is None:
        raise ServiceError(HISTORY_OFF)
    return notes.history.store


def _check(loc: Located) -> None:
    try:
        loc.store.check_note_path(loc.parts)
    except NoteError as exc:
        raise ServiceError(str(exc)) from None


def _now(loc: Located) -> tuple[bool, str | None]:
    """Whether something is at the note's path, and its etag when it is a readable note."""
    try:
        return True, loc.store.read(loc.parts).etag
    except (sx.NotFound, sx.NotADirectory):
        return False, None
    except (sx.SandboxError, NoteError):
        return True, None


def _out(v: Version) -> HistoryVersion:
    return HistoryVersion(
        version=v.id,
        time=datetime.fromtimestamp(v.at, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        etag=v.etag,
        size=v.size,
        principal=v.principal,
        tool=v.tool,
        movedTo=v.moved_to,
    )
