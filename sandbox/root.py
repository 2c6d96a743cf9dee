"""Layer 2 of containment: :class:`Root`, every file operation relative to a directory fd.

Everything revolves around one open ``O_PATH`` descriptor on the workspace directory.
Paths arrive as component tuples already checked by layer 1 (:mod:`sandbox.uri`); they are
resolved below that descriptor without following any symlink, and the operation then acts on
the descriptor it resolved, never on a path string again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, NoReturn

from sandbox import _linux
from sandbox.errors import (
    AlreadyExists,
    DirectoryNotEmpty,
    Escape,
    HardLinked,
    IdentityMismatch,
    InvalidPath,
    LimitExceeded,
    NotADirectory,
    NotARegularFile,
    NotFound,
    PermissionDenied,
    SandboxError,
    StorageError,
    TooLarge,
)

__all__ = [
    "REMOVE_GRACE_S",
    "REMOVE_PREFIX",
    "RESOLVER_ENV",
    "SWEEP_INTERVAL_S",
    "TEMP_PREFIX",
    "Components",
    "DirEntry",
    "FileIdentity",
    "FileInfo",
    "ReadResult",
    "Resolver",
    "Root",
    "is_leftover_name",
    "openat2_available",
]

Components = tuple[str, ...]
Resolver = Literal["openat2", "walk"]
Kind = Literal["file", "dir", "symlink", "other"]

# Setting this to "walk" forces the fallback resolver everywhere (tests run the whole suite
# both ways so the fallback never rots); "openat2" insists on openat2 and fails if missing.
RESOLVER_ENV = "FSNOTES_RESOLVER"

# Hidden names for our own short-lived files, recognisable so listings can skip them and an
# operator can tell what a leftover is (a crash between create and rename leaves one).
TEMP_PREFIX = ".fsnotes-tmp-"
REMOVE_PREFIX = ".fsnotes-rm-"
# 64 random bits per name: O_EXCL catches a collision, and a few attempts make a repeated
# one (or a name squatted by someone guessing) fail loudly instead of looping.
_RANDOM_NAME_BYTES = 8
_RANDOM_NAME_ATTEMPTS = 4
# Exactly the names we make, and nothing else, are ever swept (remove_stale_temps): a temp
# is the prefix and the random hex; a remove name also carries, after a '-', the inode
# number (hex) of the file the person confirmed for deletion.
_RANDOM_HEX = f"[0-9a-f]{{{2 * _RANDOM_NAME_BYTES}}}"
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + _RANDOM_HEX)
_REMOVE_NAME = re.compile(re.escape(REMOVE_PREFIX) + _RANDOM_HEX + "-([0-9a-f]{1,16})")
# create/update sweep the directory they write in at most this often per Root and
# directory: a stale temp only appears when a process of ours dies mid-write, so once a
# minute is plenty, and a burst of writes into one large directory pays one scandir, not
# one each. The start-up sweep (fsnotes.notes.store) covers the whole workspace once.
SWEEP_INTERVAL_S = 60.0
# Directories remembered for that rate limit; the table is simply cleared when full.
_SWEEP_MEMORY = 4096
# A remove name younger than this may belong to a delete still running in another process
# (which unlinks it itself within microseconds); only older ones are a killed delete's
# leftover. Removing one early would be no loss (the person confirmed it), only a wrong
# error for that delete, so the margin is generous rather than exact.
REMOVE_GRACE_S = 60.0

# update() waits this long in total for other processes of ours to finish their read-
# transform-rename of the same file (each takes milliseconds; under contention several may
# go first, and each time the name then points at the inode they wrote, so we reopen and
# queue again). A holder taking longer is stuck: failing the request beats hanging it, and
# flock itself has no timeout, hence LOCK_NB and polling.
FLOCK_TIMEOUT_S = 10.0
_FLOCK_POLL_S = 0.002

# Reads past the size fstat reported (a growing file, or a filesystem whose st_size is not
# exact) continue in chunks of this size until EOF or max_bytes + 1.
_READ_CHUNK = 1 << 16

_RESOLVE = (
    _linux.RESOLVE_BENEATH
    | _linux.RESOLVE_NO_SYMLINKS
    | _linux.RESOLVE_NO_MAGICLINKS
    | _linux.RESOLVE_NO_XDEV
)
_O_DIR_PATH = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_O_DIR_READ = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer; fstat then refuses it.
_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_open_read = _linux.opener(_O_READ, _RESOLVE)
_O_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# New files: 0o666 and new directories 0o777, both narrowed by the process umask, like
# every other Unix program; temp files start private and get the original's bits by fchmod.
_FILE_MODE = 0o666
_DIR_MODE = 0o777
_TEMP_MODE = 0o600


# --- value types --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """The (st_dev, st_ino) pair that names one inode for as long as it exists."""

    dev: int
    ino: int


@dataclass(frozen=True, slots=True)
class FileInfo:
    """What ``lstat``/``fstat`` said about one inode (symlinks are never followed)."""

    kind: Kind
    size: int
    mtime_ns: int
    mode: int
    nlink: int
    identity: FileIdentity


@dataclass(frozen=True, slots=True)
class DirEntry:
    """One name in a directory, with ``fstatat(AT_SYMLINK_NOFOLLOW)`` information."""

    name: str
    info: FileInfo


@dataclass(frozen=True, slots=True)
class ReadResult:
    """File content and the ``fstat`` of the very descriptor it was read from."""

    data: bytes
    info: FileInfo


_KINDS: dict[int, Kind] = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}

# _info runs once per read, listed entry and walked entry. A frozen dataclass __init__ sets
# each slot through object.__setattr__; setting the slots through their descriptors builds
# the same objects (tests compare them) in about half the time.
_new = object.__new__
_set_dev, _set_ino = (FileIdentity.__dict__[f].__set__ for f in ("dev", "ino"))
_set_kind, _set_size, _set_mtime, _set_mode, _set_nlink, _set_identity = (
    FileInfo.__dict__[f].__set__ for f in ("kind", "size", "mtime_ns", "mode", "nlink", "identity")
)
_set_data, _set_info = (ReadResult.__dict__[f].__set__ for f in ("data", "info"))


def _info(st: os.stat_result) -> FileInfo:
    identity = _new(FileIdentity)
    _set_dev(identity, st.st_dev)
    _set_ino(identity, st.st_ino)
    info = _new(FileInfo)
    mode = st.st_mode
    _set_kind(info, _KINDS.get(stat.S_IFMT(mode), "other"))
    _set_size(info, st.st_size)
    _set_mtime(info, st.st_mtime_ns)
    _set_mode(info, mode)
    _set_nlink(info, st.st_nlink)
    _set_identity(info, identity)
    return info


def _read_result(data: bytes, st: os.stat_result) -> ReadResult:
    result = _new(ReadResult)
    _set_data(result, data)
    _set_info(result, _info(st))
    return result


def is_leftover_name(name: str) -> bool:
    """Whether ``name`` is one of our own hidden temp or remove names (the exact pattern),
    i.e. a candidate for :meth:`Root.remove_stale_temps` in the directory holding it."""
    return _TEMP_NAME.fullmatch(name) is not None or _REMOVE_NAME.fullmatch(name) is not None


def openat2_available() -> bool:
    """Whether openat2 works in this process (probed once, cached; for ``fsnotes doctor``)."""
    return _linux.openat2_available()


# --- errors -------------------------------------------------------------------------------


def _rel(parts: Components) -> str:
    return "/".join(parts)


def _raise(err: int | None, rel: str, action: str) -> NoReturn:
    # "from None": the OSError behind it may carry a path; the typed error carries errno.
    raise _typed(err, rel, action) from None


def _typed(err: int | None, rel: str, action: str) -> SandboxError:
    """The one place an errno becomes a typed error.

    ``rel`` is the relative path the caller gave, the only path a message may name.
    """
    where = f"'{rel}'" if rel else "the workspace root"
    head = f"cannot {action} {where}"
    if err in (errno.ELOOP, errno.EXDEV):
        # ELOOP: a symlink (or magic link) in some component; EXDEV: a mount crossing or a
        # resolution leaving the root. Both mean the path does not stay inside.
        return Escape(f"{head}: a symlink or mount point is in the path", errno=err)
    if err == errno.ENOENT:
        return NotFound(f"{head}: no such file or directory", errno=err)
    if err == errno.EEXIST:
        return AlreadyExists(f"{head}: the name is already taken", errno=err)
    if err == errno.ENOTDIR:
        return NotADirectory(f"{head}: a path component is not a directory", errno=err)
    if err == errno.EISDIR:
        return NotARegularFile(f"{head}: it is a directory", errno=err)
    if err == errno.ENXIO:
        # open() of a Unix socket, or of a device without a driver.
        return NotARegularFile(f"{head}: it is not a regular file", errno=err)
    if err == errno.ENOTEMPTY:
        return DirectoryNotEmpty(f"{head}: the directory is not empty", errno=err)
    if err in (errno.EACCES, errno.EPERM):
        return PermissionDenied(f"{head}: permission denied", errno=err)
    if err == errno.ENAMETOOLONG:
        return InvalidPath(f"{head}: a name is too long", errno=err)
    if err == errno.EFBIG:
        return TooLarge(f"{head}: the file size limit was reached", errno=err)
    if err == errno.EWOULDBLOCK:
        return StorageError(f"{head}: the file is busy, try again", errno=err)
    reason = os.strerror(err) if err is not None else "unknown error"
    return StorageError(f"{head}: {reason}", errno=err)


def _check_parts(parts: Components) -> Components:
    """Defence in depth: layer 1 already guarantees this, Root must be safe on its own.

    Every name must be a non-empty ``str`` without '/' or NUL and not '.' or '..'. The fast
    path checks the joined string once; the slow path finds the culprit for the message.
    """
    if type(parts) is not tuple:
        if not isinstance(parts, list):
            raise InvalidPath("a path must be a tuple of names")
        parts = tuple(parts)
    if not parts:
        return parts
    try:
        framed = "/" + "/".join(parts) + "/"
    except TypeError:
        raise InvalidPath("a path component must be a string") from None
    if (
        framed.count("/") == len(parts) + 1  # no '/' inside a name
        and "//" not in framed  # no empty name
        and "/./" not in framed
        and "/../" not in framed
        and "\0" not in framed
    ):
        return parts
    for name in parts:
        if not name or name == "." or name == ".." or "/" in name or "\0" in name:
            raise InvalidPath(f"invalid path component {name!r}")
    raise InvalidPath("invalid path")  # unreachable: the loop names the culprit


def _check_leaf(parts: Components, action: str) -> Components:
    parts = _check_parts(parts)
    if not parts:
        raise InvalidPath(f"cannot {action} the workspace root itself")
    return parts


def _lstat_at(dirfd: int, name: str) -> os.stat_result:
    return os.stat(name, dir_fd=dirfd, follow_symlinks=False)


def _identity(st: os.stat_result) -> FileIdentity:
    return FileIdentity(st.st_dev, st.st_ino)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _random_name(prefix: str) -> str:
    return prefix + secrets.token_hex(_RANDOM_NAME_BYTES)


def _fsync_dir(dirfd: int) -> None:
    # fsync needs a real descriptor; an O_PATH one gives EBADF.
    fd = os.open(".", _O_DIR_READ, dir_fd=dirfd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Root:
    """A handle on one workspace directory; the only door to the files below it.

    Guarantees (Linux):

    * The directory is opened once (``O_PATH|O_DIRECTORY``) and its (st_dev, st_ino) kept.
      Every operation resolves its path relative to that descriptor, component tuples only;
      no absolute or host path string is ever handed to the OS again.
    * Symlinks are never followed, in any component, whether they point inside or outside:
      an intermediate symlink or a symlink to be read raises :class:`Escape`. Operations on a
      final name that is a symlink act on the link itself: ``stat`` reports it, ``unlink``,
      ``move`` and ``remove`` move or remove the link, never its target; ``create`` refuses
      the taken name even when the link dangles (nothing is created at its target).
    * Resolution uses ``openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
      RESOLVE_NO_XDEV)`` where the kernel allows it (probed once per process; Linux 5.6+),
      otherwise a walk opening one component at a time with ``O_PATH|O_NOFOLLOW|O_DIRECTORY``
      and comparing st_dev with the root's at each step. Both hold under concurrent renames:
      swapping a directory or file for a symlink mid-operation yields an error, never a file
      outside (see ``tests/test_root_races.py``). ``FSNOTES_RESOLVER=walk`` forces the walk.
    * Files are read with ``O_NOFOLLOW|O_NONBLOCK`` and ``fstat`` must then say regular file:
      FIFOs, sockets and devices are refused without blocking. Sizes are checked before
      reading and at most ``max_bytes + 1`` bytes are ever read. Files with more than one
      hard link are refused by default (their inode may be shared with a file outside).
    * ``create`` writes a hidden temp file in the same directory, fsyncs it, gives it the final
      name with ``renameat2(RENAME_NOREPLACE)`` (``link`` + ``unlink`` where that flag is
      missing) and fsyncs the directory: a reader, or a kill at any instant, finds no file or
      the whole file under the name, and a name taken meanwhile (by anything, a dangling
      symlink included) is never replaced. ``update``/``replace`` write a temp file the same
      way, check that the name still refers to the inode that was read, rename over it and
      fsync the directory: readers see the old or the new content, never a mix; a hard link is
      never written through.
    * Temp files are removed on every failure path; a kill can leave one
      (``.fsnotes-tmp-<hex>``, a full copy of a note). Each writer holds ``flock(LOCK_EX)`` on
      its temp file for the file's whole life, so :meth:`remove_stale_temps` removes exactly
      those no live writer (in any process) holds, and never anything but our exact names;
      ``create`` and ``update`` sweep the directory they write in (at most once per
      :data:`SWEEP_INTERVAL_S`). A delete killed between hiding and unlinking the confirmed
      file leaves ``.fsnotes-rm-<hex>-<inode>``, which the sweep finishes; an object
      ``remove`` deliberately left hidden is kept. A failed ``create``/``move``/``mkdir`` with
      parents removes the directories it made (only empty ones, only those it made).
    * Errors are typed (:mod:`sandbox.errors`); messages name only the relative path the
      caller gave. Every descriptor is closed on every path. A Root is safe to share between
      threads; ``close`` waits for operations in flight before releasing the descriptor.

    Not protected against (by design or because Linux gives no way):

    * A directory we hold a descriptor on being moved *out of* the workspace by someone with
      write access to both places: operations in flight keep working below it. Our own API
      cannot do this (all its renames stay inside), and across a container bind mount the
      kernel refuses such a rename (EXDEV).
    * Bind mounts of the same filesystem inside the workspace under the walk resolver: they
      share st_dev, so only openat2's RESOLVE_NO_XDEV sees them. (Under the walk, btrfs
      subvolumes, which differ in st_dev without being mounts, are refused as mounts.)
    * Hard links made from outside to a file outside: refused for reads by default
      (``allow_hardlinked_reads`` lifts that) and always for updates, but a file with one link
      can still gain a second one at any moment; such a link is only detected when seen.
    * Other programs editing the same files: ``update`` serialises our own processes with
      ``flock(LOCK_EX)``; editors that do not take flock are not excluded. Between the
      identity check and the rename there is a window of a few microseconds in which a
      swapped-in name would be replaced (the swapped-in object itself, never a symlink
      target). ``remove`` and ``move(expect=...)`` have the analogous windows, documented there.
    * Whatever a mount inside the workspace exposes under the walk resolver when it is the
      same filesystem, ``/proc`` bind-mounted into the workspace included; and the side
      effects a device driver has on ``open`` (device nodes need CAP_MKNOD to create).
    * Ownership and extended attributes are not preserved by ``update`` (only the permission
      bits are; set-uid/set-gid bits are dropped on purpose). Nothing here limits disk use.
    * Temp-file liveness rests on ``flock``: where a filesystem does not share flock between
      the machines using it, a sweep on one machine may remove another's live temp file
      (that write then fails; nothing written before is lost). Writers of fsnotes versions
      from before the lock are not seen as live either. Durability is what ``fsync`` gives
      on the filesystem at hand.
    """

    __slots__ = (
        "_active",
        "_allow_hardlinked_reads",
        "_closed",
        "_dev",
        "_fd",
        "_ino",
        "_lock",
        "_resolver",
        "_swept",
    )

    def __init__(
        self, fd: int, st: os.stat_result, resolver: Resolver, allow_hardlinked_reads: bool
    ) -> None:
        """Private: use :meth:`Root.open`."""
        self._fd = fd
        self._dev = st.st_dev
        self._ino = st.st_ino
        self._resolver: Resolver = resolver
        self._allow_hardlinked_reads = allow_hardlinked_reads
        self._lock = threading.Lock()
        self._active = 0
        self._closed = False
        # (st_dev, st_ino) of a directory -> time.monotonic() of its last sweep by a write.
        self._swept: dict[tuple[int, int], float] = {}

    # --- life cycle -----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        resolver: Literal["auto", "openat2", "walk"] = "auto",
        allow_hardlinked_reads: bool = False,
    ) -> Root:
        """Open the workspace directory at ``path`` (followed if it is itself a symlink: the
        operator's configuration is trusted, what lies below it is not).

        ``resolver="auto"`` takes ``$FSNOTES_RESOLVER`` (``walk`` or ``openat2``) if set, else
        openat2 when the probe succeeded, else the walk. Asking for openat2 where it does not
        work raises :class:`StorageError`. ``allow_hardlinked_reads`` lets ``read`` return
        files with more than one link (updates still refuse them).
        """
        if resolver == "auto":
            forced = os.environ.get(RESOLVER_ENV, "")
            if forced:
                if forced not in ("walk", "openat2"):
                    raise ValueError(f"{RESOLVER_ENV} must be 'walk' or 'openat2'")
                resolver = "walk" if forced == "walk" else "openat2"
            else:
                resolver = "openat2" if _linux.openat2_available() else "walk"
        elif resolver not in ("openat2", "walk"):
            raise ValueError("resolver must be 'auto', 'openat2' or 'walk'")
        if resolver == "openat2" and not _linux.openat2_available():
            err = _linux.openat2_probe_errno()
            raise StorageError(
                "openat2 is not usable here"
                + (f" ({errno.errorcode.get(err, err)})" if err is not None else ""),
                errno=err,
            )
        try:
            fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise NotFound("the workspace root does not exist", errno=exc.errno) from None
            if exc.errno == errno.ENOTDIR:
                raise NotADirectory(
                    "the workspace root is not a directory", errno=exc.errno
                ) from None
            _raise(exc.errno, "", "open")
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            _raise(exc.errno, "", "open")
        return cls(fd, st, resolver, allow_hardlinked_reads)

    def subroot(self, parts: Components) -> Root:
        """A new Root on the directory ``parts`` below this one, resolved like every operation.

        The directory is opened beneath this Root's descriptor with the same resolver (no
        symlink in any component, no mount crossing), so a folder granted at run time below an
        operator-approved parent is held by descriptor exactly as the parent is. The new Root
        has its own descriptor and life cycle and inherits ``allow_hardlinked_reads``.
        ``parts`` must be non-empty: the root itself is not a sub-root.
        """
        parts = _check_parts(parts)
        if not parts:
            raise InvalidPath("a sub-root needs a relative folder path")
        self._enter()
        try:
            fd = self._open_dir(parts, _O_DIR_PATH, "open")
            try:
                st = os.fstat(fd)
            except OSError as exc:
                os.close(fd)
                _raise(exc.errno, _rel(parts), "open")
        finally:
            self._leave()
        return Root(fd, st, self._resolver, self._allow_hardlinked_reads)

    @property
    def resolver(self) -> Resolver:
        """Which resolution path this Root uses."""
        return self._resolver

    @property
    def identity(self) -> FileIdentity:
        """(st_dev, st_ino) of the workspace directory, taken when it was opened."""
        return FileIdentity(self._dev, self._ino)

    def fileno(self) -> int:
        """The workspace's ``O_PATH`` directory descriptor, still owned by this Root.

        For building OS-level rules on the very directory this Root resolves from (e.g.
        Landlock rules), instead of re-opening the configured path by name. Do not close it
        or resolve paths from it directly: every file operation goes through the methods.
        """
        with self._lock:
            if self._closed:
                raise ValueError("operation on a closed Root")
            return self._fd

    def close(self) -> None:
        """Release the directory descriptor (after operations in flight finish). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._active == 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Root {state} resolver={self._resolver} dev={self._dev} ino={self._ino}>"

    def _enter(self) -> None:
        # Reference counting instead of a bare fd: closing the descriptor while another thread
        # resolves below it could let the number be reused for an unrelated directory.
        with self._lock:
            if self._closed:
                raise ValueError("operation on a closed Root")
            self._active += 1

    def _leave(self) -> None:
        with self._lock:
            self._active -= 1
            if self._closed and self._active == 0:
                os.close(self._fd)
                self._fd = -1

    # --- resolution -----------------------------------------------------------------------

    def _check_dev(self, fd_or_st: int | os.stat_result, parts: Components, action: str) -> None:
        """The walk's stand-in for RESOLVE_NO_XDEV: a different st_dev means a mount."""
        st = os.fstat(fd_or_st) if isinstance(fd_or_st, int) else fd_or_st
        if st.st_dev != self._dev:
            _raise(errno.EXDEV, _rel(parts), action)

    def _open_child(self, dirfd: int, name: str, flags: int, parts: Components, action: str) -> int:
        """Open one directory entry below ``dirfd`` without following it; ``parts`` is the
        entry's full relative path, for messages."""
        if self._resolver == "openat2":
            try:
                return _linux.openat2(dirfd, name, flags, _RESOLVE)
            except OSError as exc:
                _raise(exc.errno, _rel(parts), action)
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=dirfd)
        except OSError as exc:
            err = exc.errno
            if err == errno.ENOTDIR:
                # O_PATH|O_NOFOLLOW|O_DIRECTORY on a symlink says ENOTDIR, like on a file;
                # tell the two apart for the message (the refusal itself is already done).
                try:
                    if stat.S_ISLNK(_lstat_at(dirfd, name).st_mode):
                        err = errno.ELOOP
                except OSError:
                    pass
            _raise(err, _rel(parts), action)
        try:
            self._check_dev(fd, parts, action)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_dir(self, parts: Components, flags: int, action: str) -> int:
        """A descriptor on the directory ``parts`` (``()`` is the root), opened with ``flags``
        (``_O_DIR_PATH`` or ``_O_DIR_READ``). With ``_O_DIR_PATH`` and ``()`` this returns the
        root descriptor itself: release it with :meth:`_release`, never ``os.close``."""
        if not parts:
            if flags == _O_DIR_PATH:
                return self._fd
            try:
                return os.open(".", flags, dir_fd=self._fd)
            except OSError as exc:
                _raise(exc.errno, "", action)
        if self._resolver == "openat2":
            try:
                return _linux.openat2(self._fd, "/".join(parts), flags, _RESOLVE)
            except OSError as exc:
                _raise(exc.errno, _rel(parts), action)
        cur = self._fd
        last = len(parts) - 1
        try:
            for i, name in enumerate(parts):
                nxt = self._open_child(
                    cur, name, flags if i == last else _O_DIR_PATH, parts[: i + 1], action
                )
                if cur != self._fd:
                    os.close(cur)
                cur = nxt
        except BaseException:
            if cur != self._fd:
                os.close(cur)
            raise
        return cur

    def _release(self, fd: int) -> None:
        if fd != self._fd:
            os.close(fd)

    def _make_dirs(
        self, parts: Components, action: str, made: list[tuple[Components, FileIdentity]]
    ) -> int:
        """``mkdir -p``: an O_PATH descriptor on ``parts``, creating missing directories one
        step at a time, each opened without following links before going further. Each
        directory this call created is appended to ``made`` (path, identity), shallowest
        first, so that a failure later can take exactly those back (:meth:`_unmake_dirs`)."""
        cur = self._fd
        try:
            for i, name in enumerate(parts):
                sub = parts[: i + 1]
                try:
                    nxt = self._open_child(cur, name, _O_DIR_PATH, sub, action)
                except NotFound:
                    created = True
                    try:
                        os.mkdir(name, _DIR_MODE, dir_fd=cur)
                    except FileExistsError:
                        created = False  # made meanwhile by someone else: open what is there
                    except OSError as exc:
                        _raise(exc.errno, _rel(sub), action)
                    nxt = self._open_child(cur, name, _O_DIR_PATH, sub, action)
                    if created:
                        try:
                            made.append((sub, _identity(os.fstat(nxt))))
                        except OSError as exc:
                            os.close(nxt)
                            _raise(exc.errno, _rel(sub), action)
                if cur != self._fd:
                    os.close(cur)
                cur = nxt
        except BaseException:
            if cur != self._fd:
                os.close(cur)
            raise
        return cur

    def _unmake_dirs(self, made: list[tuple[Components, FileIdentity]]) -> None:
        """Best effort, after a failed operation: remove the directories it created, deepest
        first, each only if it is still the inode made and still empty (``rmdir`` never
        removes content). Stops at the first one that cannot go: its parents hold it.

        The identity check and the rmdir are two steps: an *empty* directory swapped in
        between (by someone with write access, in microseconds) would be removed instead.
        """
        for sub, identity in reversed(made):
            try:
                parent = self._open_dir(sub[:-1], _O_DIR_PATH, "clean up")
            except SandboxError:
                return
            try:
                st = _lstat_at(parent, sub[-1])
                if not stat.S_ISDIR(st.st_mode) or _identity(st) != identity:
                    return
                os.rmdir(sub[-1], dir_fd=parent)
            except OSError:
                return  # not empty any more (someone wrote there), or gone: leave the rest
            finally:
                self._release(parent)

    def _parent(
        self,
        parts: Components,
        make_parents: bool,
        action: str,
        made: list[tuple[Components, FileIdentity]] | None = None,
    ) -> int:
        if make_parents:
            return self._make_dirs(parts[:-1], action, [] if made is None else made)
        return self._open_dir(parts[:-1], _O_DIR_PATH, action)

    def _lstat_leaf(self, dirfd: int, parts: Components, action: str) -> os.stat_result:
        try:
            st = _lstat_at(dirfd, parts[-1])
        except OSError as exc:
            _raise(exc.errno, _rel(parts), action)
        if self._resolver == "walk" and not stat.S_ISLNK(st.st_mode):
            self._check_dev(st, parts, action)
        return st

    def _open_regular(
        self, dirfd: int, parts: Components, action: str, *, hardlinks_ok: bool
    ) -> tuple[int, os.stat_result]:
        """Open the regular file ``parts[-1]`` below its parent ``dirfd`` for reading."""
        try:
            if self._resolver == "openat2":
                fd = _open_read(dirfd, parts[-1])
            else:
                fd = os.open(parts[-1], _O_READ, dir_fd=dirfd)
        except OSError as exc:
            _raise(exc.errno, _rel(parts), action)
        return fd, self._regular_stat(fd, parts, action, hardlinks_ok)

    def _regular_stat(
        self, fd: int, parts: Components, action: str, hardlinks_ok: bool
    ) -> os.stat_result:
        """fstat the freshly opened ``fd``, which must be a regular file; closes it if not."""
        try:
            st = os.fstat(fd)
            if self._resolver == "walk":
                self._check_dev(st, parts, action)
            if not stat.S_ISREG(st.st_mode):
                what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                raise NotARegularFile(f"cannot {action} '{_rel(parts)}': it is {what}")
            if st.st_nlink > 1 and not hardlinks_ok:
                raise HardLinked(
                    f"cannot {action} '{_rel(parts)}': the file has {st.st_nlink} hard links "
                    "and may be shared with a file outside the workspace"
                )
        except BaseException:
            os.close(fd)
            raise
        return st

    @staticmethod
    def _read_fd(fd: int, st: os.stat_result, max_bytes: int, parts: Components) -> bytes:
        size = st.st_size
        if size > max_bytes:
            raise TooLarge(
                f"cannot read '{_rel(parts)}': {size} bytes is over the limit of {max_bytes}"
            )
        # Ask for one byte more than fstat said (size + 1 <= max_bytes + 1): getting exactly
        # size bytes back is EOF on a local filesystem, the common case, in one syscall.
        try:
            chunk = os.read(fd, size + 1)
        except OSError as exc:
            _raise(exc.errno, _rel(parts), "read")
        if len(chunk) == size:
            return chunk
        # The file grew or shrank since fstat, or the filesystem returned a short read:
        # read on until EOF, never more than max_bytes + 1 bytes in total.
        limit = max_bytes + 1
        chunks = [chunk]
        total = len(chunk)
        while chunk and total <= max_bytes:
            try:
                chunk = os.read(fd, min(_READ_CHUNK, limit - total))
            except OSError as exc:
                _raise(exc.errno, _rel(parts), "read")
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise TooLarge(
                f"cannot read '{_rel(parts)}': it grew past the limit of {max_bytes} bytes"
            )
        return b"".join(chunks)

    # --- operations -----------------------------------------------------------------------

    def stat(self, parts: Components) -> FileInfo:
        """Information about ``parts`` without following it (``()`` is the root itself)."""
        parts = _check_parts(parts)
        self._enter()
        try:
            if not parts:
                return _info(os.fstat(self._fd))
            if self._resolver == "openat2":
                # O_PATH|O_NOFOLLOW on a final symlink yields the link itself, which is what
                # stat must describe; an intermediate symlink or mount still fails.
                try:
                    fd = _linux.openat2(
                        self._fd,
                        "/".join(parts),
                        os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC,
                        _RESOLVE,
                    )
                except OSError as exc:
                    _raise(exc.errno, _rel(parts), "stat")
                try:
                    return _info(os.fstat(fd))
                finally:
                    os.close(fd)
            parent = self._open_dir(parts[:-1], _O_DIR_PATH, "stat")
            try:
                return _info(self._lstat_leaf(parent, parts, "stat"))
            finally:
                self._release(parent)
        finally:
            self._leave()

    def add_watch(self, add: Callable[[int, int], int], parts: Components, mask: int) -> int:
        """Resolve the directory ``parts`` like every operation and call ``add(fd, mask)``
        with a descriptor on it (for ``inotify_add_watch`` through ``/proc/self/fd/N``, so a
        watch lands on the directory layer 2 resolved, never on a path re-resolved by name).
        The descriptor is closed when ``add`` returns; ``add``'s result is returned."""
        parts = _check_parts(parts)
        self._enter()
        try:
            fd = self._open_dir(parts, _O_DIR_PATH, "watch")
            try:
                return add(fd, mask)
            finally:
                self._release(fd)
        finally:
            self._leave()

    def read(self, parts: Components, *, max_bytes: int) -> ReadResult:
        """The content of the regular file ``parts``, at most ``max_bytes`` long.

        Raises :class:`TooLarge` before reading anything if the file is bigger (and if it
        grows past the bound while being read), :class:`NotARegularFile` for directories,
        FIFOs, sockets and devices (without blocking), :class:`HardLinked` for files with
        several links unless the Root allows them, :class:`Escape` for symlinks.
        """
        parts = _check_leaf(parts, "read")
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self._enter()
        try:
            hardlinks_ok = self._allow_hardlinked_reads
            if self._resolver == "openat2":
                # The whole path in one openat2 call: the cheapest contained open.
                try:
                    fd = _open_read(self._fd, "/".join(parts))
                except OSError as exc:
                    _raise(exc.errno, _rel(parts), "read")
                st = self._regular_stat(fd, parts, "read", hardlinks_ok)
            else:
                parent = self._open_dir(parts[:-1], _O_DIR_PATH, "read")
                try:
                    fd, st = self._open_regular(parent, parts, "read", hardlinks_ok=hardlinks_ok)
                finally:
                    self._release(parent)
            try:
                return _read_result(self._read_fd(fd, st, max_bytes, parts), st)
            finally:
                os.close(fd)
        finally:
            self._leave()

    def create(self, parts: Components, data: bytes, *, make_parents: bool = False) -> FileInfo:
        """Create the new file ``parts`` with ``data``; fails if the name is taken in any way.

        Atomic: the data goes to a hidden temp file in the same directory (``O_CREAT|O_EXCL|
        O_NOFOLLOW``, fsynced), which is then given the final name without replacing
        anything (``renameat2(RENAME_NOREPLACE)``; ``link`` + ``unlink`` where that flag is
        unavailable), and the directory is fsynced. A reader, or a crash at any instant,
        sees no file or the whole file under the final name, never part of it. A taken name,
        a dangling symlink included, is :class:`AlreadyExists` (checked before writing, and
        again by the no-replace rename); nothing is created at a symlink's target.
        ``make_parents`` creates missing parent directories, each step checked; if the
        create then fails, the directories this call made are removed again (see
        :meth:`_unmake_dirs`).
        """
        parts = _check_leaf(parts, "create")
        self._enter()
        try:
            made: list[tuple[Components, FileIdentity]] = []
            try:
                parent = self._parent(parts, make_parents, "create", made)
                try:
                    self._sweep_if_due(parent, parts[:-1])
                    return self._create_in(parent, parts, data)
                finally:
                    self._release(parent)
            except BaseException:
                self._unmake_dirs(made)
                raise
        finally:
            self._leave()

    def _create_in(self, parent: int, parts: Components, data: bytes) -> FileInfo:
        name = parts[-1]
        rel = _rel(parts)
        # Fail before writing megabytes when the name is visibly taken; the no-replace
        # rename below is what makes the refusal certain.
        try:
            _lstat_at(parent, name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            _raise(exc.errno, rel, "create")
        else:
            _raise(errno.EEXIST, rel, "create")
        tmp, tfd = self._open_temp(parent, parts, "create", _FILE_MODE)
        placed = False
        try:
            try:
                _write_all(tfd, data)
                os.fsync(tfd)
            except OSError as exc:
                _raise(exc.errno, rel, "create")
            self._check_temp(parent, tmp, tfd, rel, "create")
            self._place_new(parent, tmp, name, rel)
            placed = True
            try:
                st = os.fstat(tfd)
                _fsync_dir(parent)
            except OSError as exc:
                _raise(exc.errno, rel, "create")
            return _info(st)
        finally:
            if not placed:
                self._unlink_if_same(parent, tmp, tfd)
            os.close(tfd)  # releases the temp file's flock

    @staticmethod
    def _check_temp(parent: int, tmp: str, tfd: int, rel: str, action: str) -> None:
        """The temp name must still be the inode we wrote (nobody else knows the name, but
        anyone who can write the directory could swap it); microseconds before the rename."""
        try:
            same = _identity(_lstat_at(parent, tmp)) == _identity(os.fstat(tfd))
        except OSError as exc:
            _raise(exc.errno, rel, action)
        if not same:
            raise IdentityMismatch(
                f"cannot {action} '{rel}': its temporary file was replaced while being "
                "written; nothing was written"
            )

    @staticmethod
    def _place_new(parent: int, tmp: str, name: str, rel: str) -> None:
        """Give the temp file ``tmp`` the name ``name`` in the same directory, never replacing
        whatever holds ``name`` (EEXIST becomes :class:`AlreadyExists`)."""
        try:
            _linux.renameat2(parent, tmp, parent, name, _linux.RENAME_NOREPLACE)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EINVAL):
                _raise(exc.errno, rel, "create")
        # No renameat2, or a filesystem refusing RENAME_NOREPLACE: link() never replaces.
        # A crash between link and unlink leaves the complete note plus its temp name, which
        # the stale-temp sweep removes (the note keeps its own name); filesystems without
        # hard links refuse with an error and nothing is created.
        try:
            os.link(tmp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            _raise(exc.errno, rel, "create")
        # The note is in place either way; an extra name left here is swept later.
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)

    @staticmethod
    def _unlink_if_same(dirfd: int, name: str, fd: int) -> None:
        """Best-effort cleanup: remove ``name`` only if it is still the inode behind ``fd``."""
        try:
            if _identity(os.fstat(fd)) == _identity(_lstat_at(dirfd, name)):
                os.unlink(name, dir_fd=dirfd)
        except OSError:
            pass

    def update(
        self, parts: Components, transform: Callable[[ReadResult], bytes], *, max_bytes: int
    ) -> FileInfo:
        """Atomically replace the file ``parts`` with ``transform(current content)``.

        The file is read under the rules of :meth:`read`, except that hard-linked files are
        always refused. ``transform`` may raise: nothing is written and the exception
        propagates unchanged. The result goes to a temp file in the same directory (same
        permission bits, set-id bits dropped), is fsynced, and renamed over the name only if
        the name still refers to the inode that was read (else :class:`IdentityMismatch`);
        then the directory is fsynced. Returns the new file's information.

        Our own concurrent updaters are serialised with ``flock(LOCK_EX)`` on the original,
        held from the read to the rename (waiting at most :data:`FLOCK_TIMEOUT_S`); programs
        that do not take flock are not excluded, but the identity check refuses to overwrite
        a file they replaced before our check.
        """
        parts = _check_leaf(parts, "update")
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self._enter()
        try:
            parent = self._open_dir(parts[:-1], _O_DIR_PATH, "update")
            try:
                # First: a leftover temp name may be a second link of this very note (see
                # _place_new), which would make it look hard-linked and refused.
                self._sweep_if_due(parent, parts[:-1])
                return self._update_in(parent, parts, transform, max_bytes)
            finally:
                self._release(parent)
        finally:
            self._leave()

    def _lock_current(self, parent: int, parts: Components) -> tuple[int, os.stat_result]:
        """Open and flock the file now at ``parts[-1]``, making sure the lock is on the inode
        the name refers to after locking (a previous holder may have renamed over it)."""
        name = parts[-1]
        deadline = time.monotonic() + FLOCK_TIMEOUT_S
        while True:
            fd, st = self._open_regular(parent, parts, "update", hardlinks_ok=False)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            _raise(errno.EWOULDBLOCK, _rel(parts), "update")
                        time.sleep(_FLOCK_POLL_S)
                    except OSError as exc:
                        _raise(exc.errno, _rel(parts), "update")
                try:
                    now = _lstat_at(parent, name)
                except OSError as exc:
                    _raise(exc.errno, _rel(parts), "update")
                if _identity(now) == _identity(st):
                    return fd, os.fstat(fd)  # fstat again: the holder before us may have written
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # locked a file that was renamed over meanwhile: queue on the new one
            if time.monotonic() > deadline:
                _raise(errno.EWOULDBLOCK, _rel(parts), "update")

    def _update_in(
        self,
        parent: int,
        parts: Components,
        transform: Callable[[ReadResult], bytes],
        max_bytes: int,
    ) -> FileInfo:
        name = parts[-1]
        rel = _rel(parts)
        fd, st = self._lock_current(parent, parts)
        try:  # closing fd releases the flock
            current = _read_result(self._read_fd(fd, st, max_bytes, parts), st)
            data = transform(current)
            if not isinstance(data, bytes):
                raise TypeError("transform must return bytes")
            tmp, tfd = self._open_temp(parent, parts, "update", _TEMP_MODE)
            renamed = False
            try:
                try:
                    os.fchmod(tfd, stat.S_IMODE(st.st_mode) & 0o777)
                    _write_all(tfd, data)
                    os.fsync(tfd)
                except OSError as exc:
                    _raise(exc.errno, rel, "update")
                try:
                    now = _lstat_at(parent, name)
                except OSError as exc:
                    _raise(exc.errno, rel, "update")
                if _identity(now) != _identity(st):
                    raise IdentityMismatch(
                        f"cannot update '{rel}': it was replaced by another file while being "
                        "updated; nothing was written"
                    )
                try:
                    os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
                except OSError as exc:
                    _raise(exc.errno, rel, "update")
                renamed = True
                try:
                    new = os.fstat(tfd)
                    _fsync_dir(parent)
                except OSError as exc:
                    _raise(exc.errno, rel, "update")
                return _info(new)
            finally:
                if not renamed:
                    self._unlink_if_same(parent, tmp, tfd)
                os.close(tfd)
        finally:
            os.close(fd)

    @staticmethod
    def _open_temp(parent: int, parts: Components, action: str, mode: int) -> tuple[str, int]:
        """A new hidden temp file in ``parent``, opened for writing and ``flock``-ed.

        The exclusive flock, held until the descriptor is closed (after the rename or the
        unlink), is what tells :meth:`remove_stale_temps` in any process that the file is
        live. It can only be taken after the file exists, so a sweeper may get between the
        two and remove the brand-new file: the name is then checked to still be our inode
        once the lock is held, and a fresh name is tried if it is not.
        """
        for _ in range(_RANDOM_NAME_ATTEMPTS):
            tmp = _random_name(TEMP_PREFIX)
            try:
                fd = os.open(tmp, _O_CREATE, mode, dir_fd=parent)
            except FileExistsError:
                continue
            except OSError as exc:
                _raise(exc.errno, _rel(parts), action)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _identity(_lstat_at(parent, tmp)) == _identity(os.fstat(fd)):
                    return tmp, fd
            except (BlockingIOError, FileNotFoundError):
                pass  # a sweeper holds it or took it: it removes that one, we take another
            except OSError as exc:
                Root._unlink_if_same(parent, tmp, fd)
                os.close(fd)
                _raise(exc.errno, _rel(parts), action)
            except BaseException:
                Root._unlink_if_same(parent, tmp, fd)
                os.close(fd)
                raise
            os.close(fd)
        _raise(errno.EEXIST, _rel(parts), action)

    def replace(self, parts: Components, data: bytes, *, max_bytes: int) -> FileInfo:
        """Atomically replace the existing file ``parts`` with ``data`` (see :meth:`update`;
        ``max_bytes`` bounds the read of the current content)."""
        return self.update(parts, lambda _current: data, max_bytes=max_bytes)

    def remove_stale_temps(self, parts: Components = ()) -> int:
        """Remove our own leftovers in the directory ``parts`` (not below it); return how many.

        Only names of exactly our pattern are considered, and never followed:

        * ``.fsnotes-tmp-<16 hex>``, a regular file that no process holds: every writer
          (:meth:`create`, :meth:`update`, in any process) holds ``flock(LOCK_EX)`` on its temp
          file from creating it until the rename or unlink. The file is opened like a read
          (``O_NOFOLLOW|O_NONBLOCK``, regular file by ``fstat``), must yield ``LOCK_EX|
          LOCK_NB``, and its name must still be that inode; it is unlinked while the lock is
          held. Such a file is a killed write's copy of a note (which may hold text the person
          later deletes from the note itself), or a second name of a created note where the
          link + unlink fallback was cut short (only the name goes; the note stays).
        * ``.fsnotes-rm-<16 hex>-<inode hex>``, a regular file that *is* that inode and whose
          ctime is older than :data:`REMOVE_GRACE_S`: the file a person confirmed for deletion
          when the delete was killed between hiding and unlinking it. An object :meth:`remove`
          deliberately left under such a name (it was *not* the confirmed file) has another
          inode number and is kept, as are remove names without the number (older versions).

        Symlinks, directories, FIFOs and other names are never touched. Errors (permission, a
        read-only filesystem, a name gone meanwhile) skip the name; the count says what went.
        A writer of an older fsnotes version takes no lock on its temp file, so a sweep
        running during such a writer's rename can make that write fail (never lose data).
        """
        parts = _check_parts(parts)
        self._enter()
        try:
            fd = self._open_dir(parts, _O_DIR_READ, "clean up")
            try:
                return self._sweep(fd, parts)
            finally:
                os.close(fd)
        finally:
            self._leave()

    def _sweep_if_due(self, parent: int, parts: Components) -> None:
        """The writers' sweep of the directory they wrote in: best effort, rate-limited to one
        per :data:`SWEEP_INTERVAL_S` per directory, never failing the write."""
        try:
            st = os.fstat(parent)
        except OSError:
            return
        key = (st.st_dev, st.st_ino)
        now = time.monotonic()
        with self._lock:
            last = self._swept.get(key)
            if last is not None and now - last < SWEEP_INTERVAL_S:
                return
            if len(self._swept) >= _SWEEP_MEMORY:
                self._swept.clear()
            self._swept[key] = now
        try:
            fd = os.open(".", _O_DIR_READ, dir_fd=parent)
        except OSError:
            return
        try:
            self._sweep(fd, parts)
        except (OSError, SandboxError):
            pass
        finally:
            os.close(fd)

    def _sweep(self, dirfd: int, parts: Components) -> int:
        try:
            with os.scandir(dirfd) as it:  # scandir dups fd and closes its copy
                names = [e.name for e in it if e.name.startswith((TEMP_PREFIX, REMOVE_PREFIX))]
        except OSError as exc:
            _raise(exc.errno, _rel(parts), "clean up")
        removed = 0
        for name in names:
            if _TEMP_NAME.fullmatch(name):
                removed += self._remove_stale_temp(dirfd, parts, name)
            elif (match := _REMOVE_NAME.fullmatch(name)) is not None:
                removed += self._remove_confirmed_leftover(dirfd, name, int(match[1], 16))
        return removed

    def _remove_stale_temp(self, dirfd: int, parts: Components, name: str) -> bool:
        try:
            fd, st = self._open_regular(dirfd, (*parts, name), "clean up", hardlinks_ok=True)
        except SandboxError:
            return False  # a symlink, FIFO, directory, mount, unreadable, or gone
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # a live writer holds it
            try:
                if _identity(_lstat_at(dirfd, name)) != _identity(st):
                    return False
                os.unlink(name, dir_fd=dirfd)
            except OSError:
                return False
            return True
        finally:
            os.close(fd)  # releases our lock

    def _remove_confirmed_leftover(self, dirfd: int, name: str, ino: int) -> bool:
        try:
            st = _lstat_at(dirfd, name)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_ino != ino:
            return False  # deliberately left by remove(), or not ours at all
        if self._resolver == "walk" and st.st_dev != self._dev:
            return False
        if time.time() - st.st_ctime < REMOVE_GRACE_S:
            return False  # a delete in flight may still unlink it itself
        try:
            os.unlink(name, dir_fd=dirfd)
        except OSError:
            return False
        return True

    def listdir(self, parts: Components, *, max_entries: int | None = None) -> list[DirEntry]:
        """The entries of the directory ``parts``, sorted by name, with lstat information
        (symlinks are reported as ``kind="symlink"``, never followed). With ``max_entries``,
        :class:`LimitExceeded` as soon as the directory turns out to hold more names."""
        parts = _check_parts(parts)
        self._enter()
        try:
            fd = self._open_dir(parts, _O_DIR_READ, "list")
            try:
                return self._scan(fd, parts, max_entries)
            finally:
                os.close(fd)
        finally:
            self._leave()

    @staticmethod
    def _scan(fd: int, parts: Components, limit: int | None) -> list[DirEntry]:
        """Sorted entries of the open directory ``fd``; LimitExceeded past ``limit`` names."""
        names: list[str] = []
        try:
            with os.scandir(fd) as it:  # scandir dups fd and closes its copy
                for entry in it:
                    names.append(entry.name)
                    if limit is not None and len(names) > limit:
                        raise LimitExceeded(
                            f"cannot walk '{_rel(parts)}': more entries than the limit"
                        )
        except OSError as exc:
            _raise(exc.errno, _rel(parts), "list")
        names.sort()
        out: list[DirEntry] = []
        for name in names:
            try:
                st = _lstat_at(fd, name)
            except FileNotFoundError:
                continue  # removed since it was listed
            except OSError as exc:
                _raise(exc.errno, _rel((*parts, name)), "list")
            out.append(DirEntry(name, _info(st)))
        return out

    def walk(
        self, parts: Components = (), *, max_entries: int, max_depth: int
    ) -> Iterator[tuple[Components, FileInfo]]:
        """Depth-first, names sorted: every entry below the directory ``parts``, with paths
        relative to it. Directories are yielded before their content; symlinks are yielded
        with ``kind="symlink"`` and never entered; mount points and directories that changed
        under the walk (swapped for a link, removed) are yielded but not entered.

        Raises :class:`LimitExceeded` as soon as more than ``max_entries`` entries would be
        yielded or an entry lies deeper than ``max_depth`` components. Built from directory
        descriptors only (at most ``max_depth + 1`` open at once); close or exhaust the
        iterator to release them.
        """
        parts = _check_parts(parts)
        if max_entries < 0 or max_depth < 0:
            raise ValueError("max_entries and max_depth must be >= 0")
        return self._walk(parts, max_entries, max_depth)

    def _walk(
        self, parts: Components, max_entries: int, max_depth: int
    ) -> Iterator[tuple[Components, FileInfo]]:
        self._enter()
        # Each frame: an open directory, its path, and its entries still to visit, reversed
        # so that pop() takes the next name in sorted order.
        stack: list[tuple[int, Components, list[DirEntry]]] = []
        try:
            top = self._open_dir(parts, _O_DIR_READ, "walk")
            count = 0
            try:
                stack.append((top, (), self._scan(top, parts, max_entries)[::-1]))
            except BaseException:
                os.close(top)
                raise
            while stack:
                fd, prefix, entries = stack[-1]
                if not entries:
                    os.close(fd)
                    stack.pop()
                    continue
                entry = entries.pop()
                path = (*prefix, entry.name)
                if len(path) > max_depth:
                    raise LimitExceeded(
                        f"cannot walk '{_rel(parts)}': deeper than {max_depth} levels"
                    )
                count += 1
                if count > max_entries:
                    raise LimitExceeded(
                        f"cannot walk '{_rel(parts)}': more than {max_entries} entries"
                    )
                yield path, entry.info
                if entry.info.kind != "dir":
                    continue
                child = self._open_walk_child(fd, entry.name, (*parts, *path))
                if child is None:
                    continue
                try:
                    stack.append(
                        (child, path, self._scan(child, (*parts, *path), max_entries - count)[::-1])
                    )
                except BaseException:
                    os.close(child)
                    raise
        finally:
            for fd, _prefix, _entries in stack:
                os.close(fd)
            self._leave()

    def _open_walk_child(self, dirfd: int, name: str, parts: Components) -> int | None:
        try:
            return self._open_child(dirfd, name, _O_DIR_READ, parts, "walk")
        except (Escape, NotFound, NotADirectory):
            return None  # a mount point, or changed since it was listed: not entered

    def mkdir(self, parts: Components, *, parents: bool = False, exist_ok: bool = False) -> None:
        """Create the directory ``parts``. ``parents`` creates missing parents (each step
        checked, existing ones accepted; those made are removed again if the final mkdir
        fails); ``exist_ok`` accepts an existing directory (not a symlink to one) at the name
        itself."""
        parts = _check_leaf(parts, "create directory")
        self._enter()
        try:
            made: list[tuple[Components, FileIdentity]] = []
            try:
                parent = self._parent(parts, parents, "create directory", made)
                try:
                    try:
                        os.mkdir(parts[-1], _DIR_MODE, dir_fd=parent)
                    except FileExistsError:
                        if exist_ok:
                            st = self._lstat_leaf(parent, parts, "create directory")
                            if stat.S_ISDIR(st.st_mode):
                                return
                        _raise(errno.EEXIST, _rel(parts), "create directory")
                    except OSError as exc:
                        _raise(exc.errno, _rel(parts), "create directory")
                finally:
                    self._release(parent)
            except BaseException:
                self._unmake_dirs(made)
                raise
        finally:
            self._leave()

    def unlink(self, parts: Components) -> None:
        """Remove the file or symlink ``parts`` (a symlink itself, never its target);
        directories are refused (:class:`NotARegularFile`)."""
        parts = _check_leaf(parts, "remove")
        self._enter()
        try:
            parent = self._open_dir(parts[:-1], _O_DIR_PATH, "remove")
            try:
                os.unlink(parts[-1], dir_fd=parent)
            except OSError as exc:
                _raise(exc.errno, _rel(parts), "remove")
            finally:
                self._release(parent)
        finally:
            self._leave()

    def rmdir(self, parts: Components) -> None:
        """Remove the empty directory ``parts`` (:class:`DirectoryNotEmpty` otherwise; a
        symlink to a directory is :class:`NotADirectory`)."""
        parts = _check_leaf(parts, "remove directory")
        self._enter()
        try:
            parent = self._open_dir(parts[:-1], _O_DIR_PATH, "remove directory")
            try:
                os.rmdir(parts[-1], dir_fd=parent)
            except OSError as exc:
                # POSIX lets rmdir report a non-empty directory as EEXIST too.
                err = errno.ENOTEMPTY if exc.errno == errno.EEXIST else exc.errno
                _raise(err, _rel(parts), "remove directory")
            finally:
                self._release(parent)
        finally:
            self._leave()

    def move(
        self,
        src: Components,
        dst: Components,
        *,
        make_parents: bool = False,
        expect: FileIdentity | None = None,
    ) -> FileInfo:
        """Rename ``src`` to ``dst`` without replacing anything (:class:`AlreadyExists`).

        Both parents are resolved like every other path; the rename is
        ``renameat2(RENAME_NOREPLACE)`` between the two parent descriptors. A symlink is
        moved itself, never its target. ``expect`` requires the source to still be that
        inode, checked on the source directory just before the rename (a swap in the
        microseconds between check and rename is not detected; use :meth:`remove`'s
        rename-then-verify pattern where that matters). ``make_parents`` creates missing
        directories above ``dst``.

        Without renameat2 (old kernels, or filesystems refusing the flag with EINVAL) files
        and symlinks are moved by ``link`` + ``unlink`` (no replacement possible, but for a
        moment both names exist, a crash in between leaves both, and filesystems without
        hard links refuse; the source name is only unlinked if it still is the linked inode,
        checked microseconds before); directories are checked for absence and then renamed,
        so a concurrently created *empty* directory at ``dst`` could be replaced. A move that
        fails removes the directories ``make_parents`` made for it (as :meth:`create` does).
        """
        src = _check_leaf(src, "move")
        dst = _check_leaf(dst, "move")
        if dst[: len(src)] == src:
            raise InvalidPath(f"cannot move '{_rel(src)}' into itself ('{_rel(dst)}')")
        self._enter()
        try:
            sparent = self._open_dir(src[:-1], _O_DIR_PATH, "move")
            try:
                made: list[tuple[Components, FileIdentity]] = []
                moved = False
                try:
                    dparent = self._parent(dst, make_parents, "move", made)
                    try:
                        if expect is not None:
                            st = self._lstat_leaf(sparent, src, "move")
                            if _identity(st) != expect:
                                raise IdentityMismatch(
                                    f"cannot move '{_rel(src)}': it is no longer the confirmed file"
                                )
                        self._rename_noreplace(sparent, src, dparent, dst, "move")
                        moved = True
                        return _info(self._lstat_leaf(dparent, dst, "move"))
                    finally:
                        self._release(dparent)
                except BaseException:
                    if not moved:
                        self._unmake_dirs(made)
                    raise
            finally:
                self._release(sparent)
        finally:
            self._leave()

    def _rename_noreplace(
        self,
        sdir: int,
        src: Components,
        ddir: int,
        dst: Components,
        action: str,
        *,
        fresh_dst: bool = False,
    ) -> None:
        """``renameat2(RENAME_NOREPLACE)``, with a fallback where that is unavailable.

        ``fresh_dst``: the destination is a new random name nobody else knows, so a plain
        rename cannot replace anything in practice and is the fallback (atomic, unlike
        link + unlink, which could unlink whatever was swapped in at the source).
        """
        sname, dname = src[-1], dst[-1]
        try:
            _linux.renameat2(sdir, sname, ddir, dname, _linux.RENAME_NOREPLACE)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EINVAL):
                # EEXIST names the destination, anything else the source.
                _raise(exc.errno, _rel(dst if exc.errno == errno.EEXIST else src), action)
        # Fallback: no renameat2, or a filesystem that does not support RENAME_NOREPLACE.
        if fresh_dst:
            try:
                os.rename(sname, dname, src_dir_fd=sdir, dst_dir_fd=ddir)
            except OSError as exc:
                _raise(exc.errno, _rel(src), action)
            return
        st = self._lstat_leaf(sdir, src, action)
        if stat.S_ISDIR(st.st_mode):
            # No atomic no-replace for directories: check, then rename. rename(2) can only
            # replace an *empty* directory, so that is all a concurrent creator could lose.
            try:
                _lstat_at(ddir, dname)
            except FileNotFoundError:
                pass
            except OSError as exc:
                _raise(exc.errno, _rel(dst), action)
            else:
                _raise(errno.EEXIST, _rel(dst), action)
            try:
                os.rename(sname, dname, src_dir_fd=sdir, dst_dir_fd=ddir)
            except OSError as exc:
                _raise(exc.errno, _rel(src), action)
            return
        # Files and symlinks: link() never replaces (EEXIST); then drop the source name, but
        # only if it still is the inode just linked (else something was swapped in there:
        # leave both names and say so rather than unlink a file we did not move).
        try:
            os.link(sname, dname, src_dir_fd=sdir, dst_dir_fd=ddir, follow_symlinks=False)
        except OSError as exc:
            _raise(exc.errno, _rel(dst if exc.errno == errno.EEXIST else src), action)
        try:
            same = _identity(_lstat_at(sdir, sname)) == _identity(_lstat_at(ddir, dname))
            if same:
                os.unlink(sname, dir_fd=sdir)
        except OSError as exc:
            _raise(exc.errno, _rel(src), action)
        if not same:
            raise IdentityMismatch(
                f"cannot {action} '{_rel(src)}': it was replaced while being moved; the "
                f"original is now at '{_rel(dst)}' and the replacement was left in place"
            )

    def remove(self, parts: Components, expect: FileIdentity) -> None:
        """Remove the regular file at ``parts`` only if it is the inode ``expect``.

        For confirmed deletes: the name is first renamed (no-replace) to a unique hidden name
        ``.fsnotes-rm-<random hex>-<expected inode, hex>`` in the same directory, and that
        name, which nobody else knows, is checked with lstat. If it is a regular file with the
        expected (st_dev, st_ino) it is unlinked; otherwise it is renamed back and
        :class:`IdentityMismatch` is raised. A symlink's target or a different file is never
        removed; if the original name was taken again meanwhile, the object stays under the
        hidden name and the error says so.

        A kill between hiding and unlinking leaves the confirmed file under the hidden name;
        :meth:`remove_stale_temps` finishes that delete, because the inode there is the one
        the name records. An object left hidden on purpose has another inode and is kept.

        Residual window: between the lstat and the unlink of the hidden name, someone who can
        write the directory and guesses or observes the random name could swap it; and while
        the check runs the file is briefly absent from its name. Without renameat2 the hiding
        step is a plain rename to the fresh random name, and putting back uses the no-replace
        fallback of :meth:`move`.
        """
        parts = _check_leaf(parts, "delete")
        self._enter()
        try:
            parent = self._open_dir(parts[:-1], _O_DIR_PATH, "delete")
            try:
                self._remove_in(parent, parts, expect)
            finally:
                self._release(parent)
        finally:
            self._leave()

    def _remove_in(self, parent: int, parts: Components, expect: FileIdentity) -> None:
        rel = _rel(parts)
        # The confirmed inode's number rides in the name, so that a leftover of a delete
        # killed before its unlink can be told from an object deliberately left here (one
        # that was NOT the confirmed file, below): see remove_stale_temps.
        hidden = f"{_random_name(REMOVE_PREFIX)}-{expect.ino:x}"
        hidden_parts = (*parts[:-1], hidden)
        self._rename_noreplace(parent, parts, parent, hidden_parts, "delete", fresh_dst=True)
        try:
            st = _lstat_at(parent, hidden)
        except OSError as exc:
            _raise(exc.errno, rel, "delete")
        if stat.S_ISREG(st.st_mode) and _identity(st) == expect:
            try:
                os.unlink(hidden, dir_fd=parent)
            except OSError as exc:
                _raise(exc.errno, rel, "delete")
            return
        try:
            self._rename_noreplace(parent, hidden_parts, parent, parts, "delete")
        except AlreadyExists:
            raise IdentityMismatch(
                f"cannot delete '{rel}': it is no longer the confirmed file, and the name was "
                "taken again meanwhile, so the object found there was left as "
                f"'{_rel(hidden_parts)}'"
            ) from None
        except SandboxError as exc:
            raise IdentityMismatch(
                f"cannot delete '{rel}': it is no longer the confirmed file, and putting it back "
                f"failed ({exc.message}); it was left as '{_rel(hidden_parts)}'"
            ) from None
        raise IdentityMismatch(
            f"cannot delete '{rel}': it is no longer the confirmed file; nothing was removed"
        )
