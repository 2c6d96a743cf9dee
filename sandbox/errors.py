"""Typed errors for every containment layer.

Messages are safe to show to a client: they may name the offending *relative* part
(a component, a percent-escape, the URI scheme) that the caller itself sent, but never an
absolute host path, the workspace's location, or anything the caller did not send.
Callers that need the errno for logs read ``errno`` (may be ``None``); callers that word
their own message read ``path``, the relative path the operation was refused on.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base of every error raised by the sandbox package.

    ``path`` (layer 2 only) is the relative path, '/'-joined, that the operation was refused
    on: the operand at fault (a move's destination when the destination is the problem, its
    source otherwise), or the leading part of it that is the culprit when that is known (the
    component that is a symlink, a mount point or a file). ``""`` is the Root's own
    directory; ``None`` when no single path is to blame (layer 1, the jail).
    """

    def __init__(self, message: str, *, errno: int | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errno = errno
        self.path = path

    def __str__(self) -> str:
        return self.message


# --- layer 1: lexical ---------------------------------------------------------------


class InvalidURI(SandboxError):
    """A URI that is not a strict, local ``file://`` URI (RFC 8089)."""


class InvalidPath(SandboxError):
    """A relative path or path component that is malformed or over a limit."""


class TooDeep(InvalidPath):
    """A path with more components below its workspace than :data:`sandbox.uri.MAX_DEPTH`.

    ``depth`` is how many it has and ``limit`` how many are allowed, so callers can say so
    in their own words.
    """

    def __init__(self, message: str, *, depth: int, limit: int) -> None:
        super().__init__(message)
        self.depth = depth
        self.limit = limit


class OutsideWorkspace(SandboxError):
    """A well-formed URI or path that lexically leaves the workspace."""


# --- layer 2: physical ----------------------------------------------------------------


class Escape(SandboxError):
    """Resolution met a symlink, a magic link, a mount crossing or a ``..`` escape.

    Symlinks are never followed, so any symlink in any component raises this, whether it
    points inside the workspace or not.
    """


class NotFound(SandboxError):
    """No file or directory at that path."""


class AlreadyExists(SandboxError):
    """The target name is already taken (by a file, a directory or a symlink)."""


class NotARegularFile(SandboxError):
    """The target is a directory, FIFO, socket, device or symlink where a file was needed."""


class NotADirectory(SandboxError):
    """A component that must be a directory is not one."""


class DirectoryNotEmpty(SandboxError):
    """A directory to remove still has entries."""


class TooLarge(SandboxError):
    """A file is larger than the caller's bound; it was not read."""


class HardLinked(SandboxError):
    """A regular file with more than one link: it may share its inode with a file outside."""


class IdentityMismatch(SandboxError):
    """The file at a path is no longer the one (device, inode) the caller confirmed."""


class LimitExceeded(SandboxError):
    """A listing went past its bound on entries."""


class PermissionDenied(SandboxError):
    """The operating system refused the operation (EACCES/EPERM, e.g. from the OS jail)."""


class StorageError(SandboxError):
    """Any other operating-system failure (disk full, I/O error, read-only filesystem)."""
