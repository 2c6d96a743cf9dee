"""Layer 2 of containment: :class:`Root`, every file operation relative to a directory fd.

Everything revolves around one open ``O_PATH`` descriptor on the workspace directory.
Paths arrive as component tuples already checked by layer 1 (:mod:`sandbox.uri`); they are
resolved below that descriptor without following any symlink, and the operation then acts on
the descriptor it resolved, never on a path string again.

This module is the public API: the contract (:class:`Root`'s docstring and each method's),
the policy constants and every method, which checks its arguments, counts itself in flight
and hands the work to private modules, as Go's ``os.Root`` keeps ``root.go`` apart from the
walk and the syscalls. They take the Root's directory handle (:mod:`sandbox._handle`: the
descriptor, its identity, the resolver, the operations in flight), never the Root, so none
of them imports this module: :mod:`sandbox._resolve` (both resolvers, opening and reading
files, listing), :mod:`sandbox._mutate` (temp files, no-replace renames, confirmed removes),
:mod:`sandbox._leftovers` (our hidden names and their sweep), :mod:`sandbox._errno` (errno
to typed error) and :mod:`sandbox._info` (the value types, re-exported here). ``read`` and
``stat``, the hot paths, call the resolution functions directly, with no layer in between.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Generator, Sequence
from typing import Literal, TypeVar

from sandbox import _leftovers, _linux, _mutate
from sandbox._errno import raise_typed, rel_path
from sandbox._handle import RESOLVER_ENV, Handle, Resolver
from sandbox._info import DirEntry, FileIdentity, FileInfo, ReadResult, info, read_result
from sandbox._leftovers import REMOVE_PREFIX, TEMP_PREFIX, is_leftover_name
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
    read_fd,
    regular_stat,
    release,
    scan,
    unmake_dirs,
)
from sandbox.errors import InvalidPath, SandboxError
from sandbox.uri import Components

_T = TypeVar("_T")

# Files :meth:`Root.read_many` holds open and names to the kernel before reading the first
# of them: enough reads in flight for a disk to overlap them (a build's notes on a cold disk:
# fsnotes/notes/index/scan.py measures it), few enough descriptors beside whatever else the
# process holds (1,024 is a common soft limit).
READ_MANY_WINDOW = 64


def _advise_willneed(fd: int, _st: os.stat_result) -> None:
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)


__all__ = [
    "READ_MANY_WINDOW",
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

# Hidden names for our own short-lived files (TEMP_PREFIX, REMOVE_PREFIX) and the exact
# pattern of those a sweep may remove (is_leftover_name) are defined beside the code that
# makes and sweeps them, sandbox._leftovers, and are part of this API.

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

    __slots__ = ("_allow_hardlinked_reads", "_h")

    def __init__(self, handle: Handle, allow_hardlinked_reads: bool) -> None:
        """Private: use :meth:`Root.open`."""
        self._h = handle
        self._allow_hardlinked_reads = allow_hardlinked_reads

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
        return cls(Handle.open(path, resolver), allow_hardlinked_reads)

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
        h = self._h
        h.enter()
        try:
            fd = open_dir(h, parts, O_DIR_PATH, "open")
            try:
                st = os.fstat(fd)
            except OSError as exc:
                os.close(fd)
                raise_typed(exc.errno, rel_path(parts), "open")
        finally:
            h.leave()
        return Root(Handle(fd, st, h.resolver), self._allow_hardlinked_reads)

    @property
    def resolver(self) -> Resolver:
        """Which resolution path this Root uses."""
        return self._h.resolver

    @property
    def identity(self) -> FileIdentity:
        """(st_dev, st_ino) of the workspace directory, taken when it was opened."""
        return FileIdentity(self._h.dev, self._h.ino)

    def fileno(self) -> int:
        """The workspace's ``O_PATH`` directory descriptor, still owned by this Root.

        For building OS-level rules on the very directory this Root resolves from (e.g.
        Landlock rules), instead of re-opening the configured path by name. Do not close it
        or resolve paths from it directly: every file operation goes through the methods.
        """
        return self._h.fileno()

    def close(self) -> None:
        """Release the directory descriptor (after operations in flight finish). Idempotent."""
        self._h.close()

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        h = self._h
        state = "closed" if h.closed else "open"
        return f"<Root {state} resolver={h.resolver} dev={h.dev} ino={h.ino}>"

    # --- reading --------------------------------------------------------------------------

    def stat(self, parts: Components) -> FileInfo:
        """Information about ``parts`` without following it (``()`` is the root itself)."""
        parts = check_parts(parts)
        h = self._h
        h.enter()
        try:
            if not parts:
                return info(os.fstat(h.fd))
            if h.resolver == "openat2":
                # O_PATH|O_NOFOLLOW on a final symlink yields the link itself, which is what
                # stat must describe; an intermediate symlink or mount still fails.
                try:
                    fd = _linux.openat2(
                        h.fd,
                        "/".join(parts),
                        os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC,
                        RESOLVE,
                    )
                except OSError as exc:
                    raise_resolved(h, exc.errno, parts, "stat")
                try:
                    return info(os.fstat(fd))
                finally:
                    os.close(fd)
            parent = open_dir(h, parts[:-1], O_DIR_PATH, "stat")
            try:
                return info(lstat_leaf(h, parent, parts, "stat"))
            finally:
                release(h, parent)
        finally:
            h.leave()

    def add_watch(self, add: Callable[[int, int], int], parts: Components, mask: int) -> int:
        """Resolve the directory ``parts`` like every operation and call ``add(fd, mask)``
        with a descriptor on it (for ``inotify_add_watch`` through ``/proc/self/fd/N``, so a
        watch lands on the directory layer 2 resolved, never on a path re-resolved by name).
        The descriptor is closed when ``add`` returns; ``add``'s result is returned."""
        parts = check_parts(parts)
        h = self._h
        h.enter()
        try:
            fd = open_dir(h, parts, O_DIR_PATH, "watch")
            try:
                return add(fd, mask)
            finally:
                release(h, fd)
        finally:
            h.leave()

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
        return self._with_regular(
            parts, "read", lambda fd, st: read_result(read_fd(fd, st, max_bytes, parts), st)
        )

    def read_many(
        self, folder: Components, names: Sequence[str], *, max_bytes: int
    ) -> Generator[tuple[str, ReadResult | SandboxError]]:
        """What :meth:`read` gives for each file ``folder/name``, in order: its
        :class:`ReadResult`, or the :class:`~sandbox.errors.SandboxError` its read raises
        (each file is opened and checked exactly as :meth:`read` opens and checks it).

        For a caller about to read many files of one folder (an index build): each window
        of :data:`READ_MANY_WINDOW` files is opened and named to the kernel
        (``posix_fadvise(POSIX_FADV_WILLNEED)``) before the first of them is read, so that
        their reads from a cold disk overlap instead of each waiting in turn, with one open
        per file. A file's content is that of the very file opened (a rename over it
        meanwhile is read next time). At most a window of descriptors is held, and they
        are closed when the iterator is closed or dropped half-way."""
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        checked: list[tuple[str, Components | SandboxError]] = []
        for name in names:
            try:
                checked.append((name, check_leaf((*folder, name), "read")))
            except SandboxError as exc:
                checked.append((name, exc))
        for start in range(0, len(checked), READ_MANY_WINDOW):
            window = checked[start : start + READ_MANY_WINDOW]
            held: dict[int, tuple[int, os.stat_result]] = {}  # place in window: open file
            failed: dict[int, SandboxError] = {}
            try:
                for place, (_name, parts) in enumerate(window):
                    if isinstance(parts, SandboxError):
                        continue
                    try:
                        fd, st = self._open_regular(parts, "read")
                    except SandboxError as exc:
                        failed[place] = exc
                        continue
                    held[place] = (fd, st)
                    _advise_willneed(fd, st)
                for place, (name, parts) in enumerate(window):
                    if isinstance(parts, SandboxError):
                        yield name, parts
                        continue
                    if place in failed:
                        yield name, failed[place]
                        continue
                    fd, st = held.pop(place)
                    try:
                        result: ReadResult | SandboxError = read_result(
                            read_fd(fd, st, max_bytes, parts), st
                        )
                    except SandboxError as exc:
                        result = exc
                    finally:
                        os.close(fd)
                    yield name, result
            finally:
                for fd, _st in held.values():
                    os.close(fd)

    def _with_regular(
        self, parts: Components, op: str, use: Callable[[int, os.stat_result], _T]
    ) -> _T:
        """``use(fd, stat)`` on the regular file ``parts`` (:meth:`_open_regular`), closed
        afterwards."""
        fd, st = self._open_regular(parts, op)
        try:
            return use(fd, st)
        finally:
            os.close(fd)

    def _open_regular(self, parts: Components, op: str) -> tuple[int, os.stat_result]:
        """A descriptor on the regular file ``parts``, opened beneath the root (no symlink
        followed, no FIFO blocked on, hard links refused unless allowed), and its fstat;
        the caller closes it. ``parts`` checked by ``check_leaf`` (read checks them first,
        as before, then its bound)."""
        h = self._h
        h.enter()
        try:
            hardlinks_ok = self._allow_hardlinked_reads
            if h.resolver == "openat2":
                # The whole path in one openat2 call: the cheapest contained open.
                try:
                    fd = open_read(h.fd, "/".join(parts))
                except OSError as exc:
                    raise_resolved(h, exc.errno, parts, op)
                return fd, regular_stat(h, fd, parts, op, hardlinks_ok)
            parent = open_dir(h, parts[:-1], O_DIR_PATH, op)
            try:
                return open_regular(h, parent, parts, op, hardlinks_ok=hardlinks_ok)
            finally:
                release(h, parent)
        finally:
            h.leave()

    # Tests drive the short-read loop directly on a descriptor they control.
    _read_fd = staticmethod(read_fd)

    def listdir(self, parts: Components, *, max_entries: int | None = None) -> list[DirEntry]:
        """The entries of the directory ``parts``, sorted by name, with lstat information
        (symlinks are reported as ``kind="symlink"``, never followed). With ``max_entries``,
        :class:`LimitExceeded` as soon as the directory turns out to hold more names."""
        parts = check_parts(parts)
        h = self._h
        h.enter()
        try:
            fd = open_dir(h, parts, O_DIR_READ, "list")
            try:
                return [DirEntry(name, info(st)) for name, st in scan(fd, parts, max_entries)]
            finally:
                os.close(fd)
        finally:
            h.leave()

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
        h = self._h
        h.enter()
        try:
            made: Made = []
            try:
                parent = parent_dir(h, parts, make_parents, "create", made)
                try:
                    _leftovers.sweep_if_due(h, parent, parts[:-1], SWEEP_INTERVAL_S, REMOVE_GRACE_S)
                    return info(_mutate.create_in(parent, parts, data))
                finally:
                    release(h, parent)
            except BaseException:
                unmake_dirs(h, made)
                raise
        finally:
            h.leave()

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
        h = self._h
        h.enter()
        try:
            parent = open_dir(h, parts[:-1], O_DIR_PATH, "update")
            try:
                # First: a leftover temp name may be a second link of this very note (see
                # _mutate._place_new), which would make it look hard-linked and refused.
                _leftovers.sweep_if_due(h, parent, parts[:-1], SWEEP_INTERVAL_S, REMOVE_GRACE_S)
                fd, st = _mutate.lock_current(h, parent, parts, FLOCK_TIMEOUT_S)
                try:  # closing fd releases the flock
                    data = transform(read_result(read_fd(fd, st, max_bytes, parts), st))
                    if not isinstance(data, bytes):
                        raise TypeError("transform must return bytes")
                    return info(_mutate.write_over(parent, parts, st, data))
                finally:
                    os.close(fd)
            finally:
                release(h, parent)
        finally:
            h.leave()

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
        h = self._h
        h.enter()
        try:
            fd = open_dir(h, parts, O_DIR_READ, "clean up")
            try:
                return _leftovers.sweep(h, fd, parts, REMOVE_GRACE_S)
            finally:
                os.close(fd)
        finally:
            h.leave()

    def mkdir(self, parts: Components, *, parents: bool = False, exist_ok: bool = False) -> None:
        """Create the directory ``parts``. ``parents`` creates missing parents (each step
        checked, existing ones accepted; those made are removed again if the final mkdir
        fails); ``exist_ok`` accepts an existing directory (not a symlink to one) at the name
        itself."""
        parts = check_leaf(parts, "create directory")
        h = self._h
        h.enter()
        try:
            _mutate.mkdir(h, parts, parents, exist_ok)
        finally:
            h.leave()

    def unlink(self, parts: Components) -> None:
        """Remove the file or symlink ``parts`` (a symlink itself, never its target);
        directories are refused (:class:`NotARegularFile`)."""
        parts = check_leaf(parts, "remove")
        h = self._h
        h.enter()
        try:
            _mutate.unlink(h, parts)
        finally:
            h.leave()

    def rmdir(self, parts: Components) -> None:
        """Remove the empty directory ``parts`` (:class:`DirectoryNotEmpty` otherwise; a
        symlink to a directory is :class:`NotADirectory`)."""
        parts = check_leaf(parts, "remove directory")
        h = self._h
        h.enter()
        try:
            _mutate.rmdir(h, parts)
        finally:
            h.leave()

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
        h = self._h
        h.enter()
        try:
            return info(_mutate.move(h, src, dst, make_parents, expect))
        finally:
            h.leave()

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
        h = self._h
        h.enter()
        try:
            _mutate.remove(h, parts, expect)
        finally:
            h.leave()
