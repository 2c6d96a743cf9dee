"""Layer 2's errors: the one place an errno becomes a typed error (:mod:`sandbox.errors`).

Private to the package. Messages name only the relative path the caller gave (``rel``, also
the error's ``path``), never a host path: the ``OSError`` behind an error is dropped.
"""

from __future__ import annotations

import errno
import os
from typing import NoReturn

from sandbox.errors import (
    AlreadyExists,
    DirectoryNotEmpty,
    Escape,
    InvalidPath,
    NotADirectory,
    NotARegularFile,
    NotFound,
    PermissionDenied,
    SandboxError,
    StorageError,
    TooLarge,
)
from sandbox.uri import Components


def rel_path(parts: Components) -> str:
    return "/".join(parts)


def raise_typed(err: int | None, rel: str, action: str) -> NoReturn:
    # "from None": the OSError behind it may carry a path; the typed error carries errno.
    raise typed_error(err, rel, action) from None


def typed_error(err: int | None, rel: str, action: str) -> SandboxError:
    """The one place an errno becomes a typed error.

    ``rel`` is the relative path the caller gave (or the leading part of it at fault), the
    only path a message may name; it is also the error's ``path``.
    """
    where = f"'{rel}'" if rel else "the workspace root"
    kind, reason = _errno_kind(err)
    return kind(f"cannot {action} {where}: {reason}", errno=err, path=rel)


def _errno_kind(err: int | None) -> tuple[type[SandboxError], str]:
    if err in (errno.ELOOP, errno.EXDEV):
        # ELOOP: a symlink (or magic link) in some component; EXDEV: a mount crossing or a
        # resolution leaving the root. Both mean the path does not stay inside.
        return Escape, "a symlink or mount point is in the path"
    if err == errno.ENOENT:
        return NotFound, "no such file or directory"
    if err == errno.EEXIST:
        return AlreadyExists, "the name is already taken"
    if err == errno.ENOTDIR:
        return NotADirectory, "a path component is not a directory"
    if err == errno.EISDIR:
        return NotARegularFile, "it is a directory"
    if err == errno.ENXIO:
        # open() of a Unix socket, or of a device without a driver.
        return NotARegularFile, "it is not a regular file"
    if err == errno.ENOTEMPTY:
        return DirectoryNotEmpty, "the directory is not empty"
    if err in (errno.EACCES, errno.EPERM):
        return PermissionDenied, "permission denied"
    if err == errno.ENAMETOOLONG:
        return InvalidPath, "a name is too long"
    if err == errno.EFBIG:
        return TooLarge, "the file size limit was reached"
    if err == errno.EWOULDBLOCK:
        return StorageError, "the file is busy, try again"
    return StorageError, os.strerror(err) if err is not None else "unknown error"
