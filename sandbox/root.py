"""Layer 2 of containment: :class:`Root`, every file operation relative to a directory fd.

Everything revolves around one open ``O_PATH`` descriptor on the workspace directory.
Paths arrive as component tuples already checked by layer 1 (:mod:`sandbox.uri`); they are
resolved below that descriptor without following any symlink, and the operation then acts on
the descriptor it resolved, never on a path string again.

This module is the public API: the contract (:class:`Root`'s docstring and each method's),
the value types, the policy constants and every method, which checks its arguments, counts
itself in flight and hands the work to two private modules, as Go's ``os.Root`` keeps
``root.go`` apart from the walk and the syscalls: :mod:`sandbox._resolve` (both resolvers,
errno to typed error, opening and reading files, listing) and :mod:`sandbox._mutate` (temp
files, no-replace renames, confirmed removes, the sweep). ``read`` and ``stat``, the hot
paths, call the resolution functions directly, with no layer in between. It is longer than
the ~600 lines a module here aims at because it is mostly that contract, kept in one place
(about a third docstrings; the code is about 400 lines).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sandbox import _linux, _mutate
from sandbox._mutate import REMOVE_PREFIX, TEMP_PREFIX, is_leftover_name
from sandbox._resolve import (
    O_DIR_PATH,
    O_DIR_READ,
    RESOLVE,
    Made,
    check_leaf,
    check_parts,
    lstat_leaf,
    open_dir,
    open_read,
    open_regular,
    parent_dir,
    raise_resolved,
    raise_typed,
    read_fd,
    regular_stat,
    rel_path,
    release,
    scan,
    unmake_dirs,
)
from sandbox.errors import InvalidPath, NotADirectory, NotFound, StorageError
from sandbox.uri import Components

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

Resolver = Literal["openat2", "walk"]
Kind = Literal["file", "dir", "symlink", "other"]

# Setting this to "walk" forces the fallback resolver everywhere (tests run the whole suite
# both ways so the fallback never rots); "openat2" insists on openat2 and fails if missing.
RESOLVER_ENV = "FSNOTES_RESOLVER"

# Hidden names for our own short-lived files (TEMP_PREFIX, REMOVE_PREFIX) and the exact
# pattern of those a sweep may remove (is_leftover_name) are defined beside the code that
# makes and sweeps them, sandbox._mutate, and are part of this API.

# create/update sweep the directory they write in at most this often per Root and
# directory: a stale temp only appears when a process of ours dies mid-write, so once a
# minute is plenty, and a burst of writes into one large directory pays one scandir, not
# one each. The start-up sweep (fsnotes.notes.store) covers the whole workspace once.
SWEEP_INTERVAL_S = 60.0
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

# _info runs once per read, stat and listed entry. A frozen dataclass __init__ sets
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


def openat2_available() -> bool:
    """Whether openat2 works in this process (probed once, cached; for ``fsnotes doctor``)."""
    return _linux.openat2_available()


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
      outside (see ``tests/sandbox/test_root_races.py``). ``FSNOTES_RESOLVER=walk`` forces
      the walk.
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
            raise_typed(exc.errno, "", "open")
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            raise_typed(exc.errno, "", "open")
        return cls(fd, st, resolver, allow_hardlinked_reads)

    def subroot(self, parts: Components) -> Root:
        """A new Root on the directory ``parts`` below this one, resolved like every operation.

        The directory is opened beneath this Root's descriptor with the same resolver (no
        symlink in any component, no mount crossing), so a folder granted at run time below an
        operator-approved parent is held by descriptor exactly as the parent is. The new Root
        has its own descriptor and life cycle and inherits ``allow_hardlinked_reads``.
        ``parts`` must be non-empty: the root itself is not a sub-root.
        """
        parts = check_parts(parts)
        if not parts:
            raise InvalidPath("a sub-root needs a relative folder path")
        self._enter()
        try:
            fd = open_dir(self, parts, O_DIR_PATH, "open")
            try:
                st = os.fstat(fd)
            except OSError as exc:
                os.close(fd)
                raise_typed(exc.errno, rel_path(parts), "open")
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

    # --- reading --------------------------------------------------------------------------

    def stat(self, parts: Components) -> FileInfo:
        """Information about ``parts`` without following it (``()`` is the root itself)."""
        parts = check_parts(parts)
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
                        RESOLVE,
                    )
                except OSError as exc:
                    raise_resolved(self, exc.errno, parts, "stat")
                try:
                    return _info(os.fstat(fd))
                finally:
                    os.close(fd)
            parent = open_dir(self, parts[:-1], O_DIR_PATH, "stat")
            try:
                return _info(lstat_leaf(self, parent, parts, "stat"))
            finally:
                release(self, parent)
        finally:
            self._leave()

    def add_watch(self, add: Callable[[int, int], int], parts: Components, mask: int) -> int:
        """Resolve the directory ``parts`` like every operation and call ``add(fd, mask)``
        with a descriptor on it (for ``inotify_add_watch`` through ``/proc/self/fd/N``, so a
        watch lands on the directory layer 2 resolved, never on a path re-resolved by name).
        The descriptor is closed when ``add`` returns; ``add``'s result is returned."""
        parts = check_parts(parts)
        self._enter()
        try:
            fd = open_dir(self, parts, O_DIR_PATH, "watch")
            try:
                return add(fd, mask)
            finally:
                release(self, fd)
        finally:
            self._leave()

    def read(self, parts: Components, *, max_bytes: int) -> ReadResult:
        """The content of the regular file ``parts``, at most ``max_bytes`` long.

        Raises :class:`TooLarge` before reading anything if the file is bigger (and if it
        grows past the bound while being read), :class:`NotARegularFile` for directories,
        FIFOs, sockets and devices (without blocking), :class:`HardLinked` for files with
        several links unless the Root allows them, :class:`Escape` for symlinks.
        """
        parts = check_leaf(parts, "read")
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self._enter()
        try:
            hardlinks_ok = self._allow_hardlinked_reads
            if self._resolver == "openat2":
                # The whole path in one openat2 call: the cheapest contained open.
                try:
                    fd = open_read(self._fd, "/".join(parts))
                except OSError as exc:
                    raise_resolved(self, exc.errno, parts, "read")
                st = regular_stat(self, fd, parts, "read", hardlinks_ok)
            else:
                parent = open_dir(self, parts[:-1], O_DIR_PATH, "read")
                try:
                    fd, st = open_regular(self, parent, parts, "read", hardlinks_ok=hardlinks_ok)
                finally:
                    release(self, parent)
            try:
                return _read_result(read_fd(fd, st, max_bytes, parts), st)
            finally:
                os.close(fd)
        finally:
            self._leave()

    # Tests drive the short-read loop directly on a descriptor they control.
    _read_fd = staticmethod(read_fd)

    def listdir(self, parts: Components, *, max_entries: int | None = None) -> list[DirEntry]:
        """The entries of the directory ``parts``, sorted by name, with lstat information
        (symlinks are reported as ``kind="symlink"``, never followed). With ``max_entries``,
        :class:`LimitExceeded` as soon as the directory turns out to hold more names."""
        parts = check_parts(parts)
        self._enter()
        try:
            fd = open_dir(self, parts, O_DIR_READ, "list")
            try:
                return [DirEntry(name, _info(st)) for name, st in scan(fd, parts, max_entries)]
            finally:
                os.close(fd)
        finally:
            self._leave()

    # --- writing --------------------------------------------------------------------------

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
        :func:`sandbox._resolve.unmake_dirs`).
        """
        parts = check_leaf(parts, "create")
        self._enter()
        try:
            made: Made = []
            try:
                parent = parent_dir(self, parts, make_parents, "create", made)
                try:
                    _mutate.sweep_if_due(self, parent, parts[:-1], SWEEP_INTERVAL_S, REMOVE_GRACE_S)
                    return _info(_mutate.create_in(parent, parts, data))
                finally:
                    release(self, parent)
            except BaseException:
                unmake_dirs(self, made)
                raise
        finally:
            self._leave()

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
        parts = check_leaf(parts, "update")
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self._enter()
        try:
            parent = open_dir(self, parts[:-1], O_DIR_PATH, "update")
            try:
                # First: a leftover temp name may be a second link of this very note (see
                # _mutate._place_new), which would make it look hard-linked and refused.
                _mutate.sweep_if_due(self, parent, parts[:-1], SWEEP_INTERVAL_S, REMOVE_GRACE_S)
                fd, st = _mutate.lock_current(self, parent, parts, FLOCK_TIMEOUT_S)
                try:  # closing fd releases the flock
                    data = transform(_read_result(read_fd(fd, st, max_bytes, parts), st))
                    if not isinstance(data, bytes):
                        raise TypeError("transform must return bytes")
                    return _info(_mutate.write_over(parent, parts, st, data))
                finally:
                    os.close(fd)
            finally:
                release(self, parent)
        finally:
            self._leave()

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
        parts = check_parts(parts)
        self._enter()
        try:
            fd = open_dir(self, parts, O_DIR_READ, "clean up")
            try:
                return _mutate.sweep(self, fd, parts, REMOVE_GRACE_S)
            finally:
                os.close(fd)
        finally:
            self._leave()

    def mkdir(self, parts: Components, *, parents: bool = False, exist_ok: bool = False) -> None:
        """Create the directory ``parts``. ``parents`` creates missing parents (each step
        checked, existing ones accepted; those made are removed again if the final mkdir
        fails); ``exist_ok`` accepts an existing directory (not a symlink to one) at the name
        itself."""
        parts = check_leaf(parts, "create directory")
        self._enter()
        try:
            _mutate.mkdir(self, parts, parents, exist_ok)
        finally:
            self._leave()

    def unlink(self, parts: Components) -> None:
        """Remove the file or symlink ``parts`` (a symlink itself, never its target);
        directories are refused (:class:`NotARegularFile`)."""
        parts = check_leaf(parts, "remove")
        self._enter()
        try:
            _mutate.unlink(self, parts)
        finally:
            self._leave()

    def rmdir(self, parts: Components) -> None:
        """Remove the empty directory ``parts`` (:class:`DirectoryNotEmpty` otherwise; a
        symlink to a directory is :class:`NotADirectory`)."""
        parts = check_leaf(parts, "remove directory")
        self._enter()
        try:
            _mutate.rmdir(self, parts)
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
        src = check_leaf(src, "move")
        dst = check_leaf(dst, "move")
        if dst[: len(src)] == src:
            raise InvalidPath(f"cannot move '{rel_path(src)}' into itself ('{rel_path(dst)}')")
        self._enter()
        try:
            return _info(_mutate.move(self, src, dst, make_parents, expect))
        finally:
            self._leave()

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
        parts = check_leaf(parts, "delete")
        self._enter()
        try:
            _mutate.remove(self, parts, expect)
        finally:
            self._leave()
