"""The notes tools' one error style: :class:`ServiceError`, one actionable sentence for the
model, and :func:`explain`, which turns a sandbox, store or grant error into one without host
paths."""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import Iterator, Sequence

from fsnotes.notes.index.catalog import CatalogUnavailable
from fsnotes.notes.index.connections import IndexProblem
from fsnotes.notes.store import NoteError, display
from fsnotes.security.grants import NotGranted
from sandbox import errors as sx

log = logging.getLogger("fsnotes.notes")

Components = tuple[str, ...]


class ServiceError(Exception):
    """One actionable sentence for the model (becomes an ``isError`` tool result)."""


def explain(exc: BaseException, *operands: Components) -> str:
    """Turn a sandbox/store/grant error into one actionable sentence without host paths.

    ``operands`` are the paths the failed operation was given (a move's source, then its
    destination). The sentence names the one the sandbox says it refused (``path``), and
    the leading part of it at fault when that is known and shorter (the symlink, the mount
    point, the file where a folder should be)."""
    parts, culprit = _refused_on(exc, operands)
    where = f"'{display(parts)}'" if parts else "That path"
    at = f" at '{display(culprit)}'" if culprit else ""
    match exc:
        case NoteError() | NotGranted() | ServiceError():
            return str(exc)
        case sx.NotFound():
            return f"{where} does not exist; check the path with notes_list or notes_search."
        case sx.AlreadyExists():
            return f"{where} already exists; choose another path (nothing is ever overwritten)."
        case sx.Escape():
            return (
                f"{where} goes through a symbolic link or another filesystem{at}, which "
                "fsnotes never follows; use a path to a regular note."
            )
        case sx.OutsideWorkspace():
            return f"That path leaves the workspace ({exc}); use a path inside it."
        case sx.InvalidURI():
            return f"That URI is not a valid local file:// URI: {exc}."
        case sx.TooDeep():
            return (
                f"That path is {exc.depth} levels deep; fsnotes allows at most {exc.limit} "
                "below a workspace."
            )
        case sx.InvalidPath():
            return f"That path is not valid: {exc}."
        case sx.NotARegularFile():
            return f"{where} is not a regular file, so it is not a note."
        case sx.NotADirectory():
            if culprit:
                return f"'{display(culprit)}' in {where} is a file, not a folder."
            return f"A folder in {where} is a file, not a folder."
        case sx.TooLarge():
            return f"{where} is larger than fsnotes reads; it was not opened."
        case sx.HardLinked():
            return (
                f"{where} has several hard links (it may be shared with a file outside the "
                "workspace), so fsnotes will not read or change it."
            )
        case sx.IdentityMismatch():
            return f"{where} was replaced by another file meanwhile; nothing was changed."
        case sx.PermissionDenied():
            code = errno.errorcode.get(exc.errno or 0, "")
            return f"The operating system denied access to {where}{f' ({code})' if code else ''}."
        case sx.SandboxError():
            return f"{where} could not be used: {exc}."
    return "Internal error."


def _refused_on(
    exc: BaseException, operands: Sequence[Components]
) -> tuple[Components | None, Components | None]:
    """The operand ``exc`` is about (the first whose leading part its ``path`` is, else the
    first given), and that leading part when it is shorter than the operand."""
    first = operands[0] if operands else None
    named = exc.path if isinstance(exc, sx.SandboxError) else None
    if not named:
        return first, None
    culprit = tuple(named.split("/"))
    for parts in operands:
        if parts[: len(culprit)] == culprit:
            return parts, culprit if len(culprit) < len(parts) else None
    return first, None


@contextlib.contextmanager
def index_unavailable() -> Iterator[None]:
    """Turns the index's "cannot answer now" into a ServiceError the model can act on
    (retry shortly, or ask the person running fsnotes); nothing was changed."""
    try:
        yield
    except CatalogUnavailable as exc:
        raise ServiceError(str(exc)) from None
    except IndexProblem:
        raise ServiceError(
            "The search index cannot be opened right now; try again in a moment."
        ) from None
    except OSError as exc:
        log.warning("cannot open the search index: %s", exc)
        raise ServiceError(
            "The search index cannot be opened (the state directory is not usable); "
            "ask the person running fsnotes to check its log."
        ) from None
