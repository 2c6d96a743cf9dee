"""Layer 2's resolution: how a checked component tuple becomes a descriptor below the root.

Private to :mod:`sandbox.root`, whose :class:`~sandbox.root.Root` states the contract this
code keeps. Two resolvers share every function here: ``openat2`` (the whole path in one
call, the kernel refusing symlinks, magic links, mounts and leaving the root) and the walk
(one ``O_NOFOLLOW`` open per component, st_dev compared with the root's at each step). Also
here: the defence-in-depth check of names, ``mkdir -p`` by descriptor, opening and reading a
regular file, and listing a directory by descriptor.

The functions take the Root's directory handle (:mod:`sandbox._handle`: its descriptor,
st_dev and resolver); they are the Root's own code, split out of ``root.py`` for size, not an
API. They deal in descriptors and ``os.stat_result``; ``root.py`` turns those into its value
types (:mod:`sandbox._info`).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NoReturn

from sandbox import _linux
from sandbox._errno import raise_typed, rel_path
from sandbox._handle import Handle
from sandbox.errors import (
    HardLinked,
    InvalidPath,
    LimitExceeded,
    NotARegularFile,
    NotFound,
    SandboxError,
    TooLarge,
)
from sandbox.uri import Components

# (st_dev, st_ino): an inode, for comparisons inside the package (root.py's FileIdentity is
# the public form).
Inode = tuple[int, int]
# Directories a call created (path, inode), shallowest first, so that a failure can take
# exactly those back.
Made = list[tuple[tuple[str, ...], Inode]]

RESOLVE = (
    _linux.RESOLVE_BENEATH
    | _linux.RESOLVE_NO_SYMLINKS
    | _linux.RESOLVE_NO_MAGICLINKS
    | _linux.RESOLVE_NO_XDEV
)
O_DIR_PATH = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
O_DIR_READ = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer; fstat then refuses it.
O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
open_read = _linux.opener(O_READ, RESOLVE)
# New directories: 0o777 narrowed by the process umask, like every other Unix program.
DIR_MODE = 0o777

# Reads past the size fstat reported (a growing file, or a filesystem whose st_size is not
# exact) continue in chunks of this size until EOF or max_bytes + 1.
_READ_CHUNK = 1 << 16


# --- errors and names ---------------------------------------------------------------------


def check_parts(parts: Components) -> Components:
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


def check_leaf(parts: Components, action: str) -> Components:
    parts = check_parts(parts)
    if not parts:
        raise InvalidPath(f"cannot {action} the workspace root itself")
    return parts


def lstat_at(dirfd: int, name: str) -> os.stat_result:
    return os.stat(name, dir_fd=dirfd, follow_symlinks=False)


def inode(st: os.stat_result) -> Inode:
    return (st.st_dev, st.st_ino)


# --- resolution ---------------------------------------------------------------------------


def check_dev(root: Handle, fd_or_st: int | os.stat_result, parts: Components, action: str) -> None:
    """The walk's stand-in for RESOLVE_NO_XDEV: a different st_dev means a mount."""
    st = os.fstat(fd_or_st) if isinstance(fd_or_st, int) else fd_or_st
    if st.st_dev != root.dev:
        raise_typed(errno.EXDEV, rel_path(parts), action)


def open_child(
    root: Handle, dirfd: int, name: str, flags: int, parts: Components, action: str
) -> int:
    """Open one directory entry below ``dirfd`` without following it; ``parts`` is the
    entry's full relative path, for messages."""
    if root.resolver == "openat2":
        try:
            return _linux.openat2(dirfd, name, flags, RESOLVE)
        except OSError as exc:
            raise_typed(exc.errno, rel_path(parts), action)
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=dirfd)
    except OSError as exc:
        err = exc.errno
        if err == errno.ENOTDIR:
            # O_PATH|O_NOFOLLOW|O_DIRECTORY on a symlink says ENOTDIR, like on a file;
            # tell the two apart for the message (the refusal itself is already done).
            try:
                if stat.S_ISLNK(lstat_at(dirfd, name).st_mode):
                    err = errno.ELOOP
            except OSError:
                pass
        raise_typed(err, rel_path(parts), action)
    try:
        check_dev(root, fd, parts, action)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(root: Handle, parts: Components, flags: int, action: str) -> int:
    """A descriptor on the directory ``parts`` (``()`` is the root), opened with ``flags``
    (``O_DIR_PATH`` or ``O_DIR_READ``). With ``O_DIR_PATH`` and ``()`` this returns the
    root descriptor itself: release it with :func:`release`, never ``os.close``."""
    if not parts:
        if flags == O_DIR_PATH:
            return root.fd
        try:
            return os.open(".", flags, dir_fd=root.fd)
        except OSError as exc:
            raise_typed(exc.errno, "", action)
    if root.resolver == "openat2":
        try:
            return _linux.openat2(root.fd, "/".join(parts), flags, RESOLVE)
        except OSError as exc:
            raise_resolved(root, exc.errno, parts, action)
    top = root.fd
    cur = top
    last = len(parts) - 1
    try:
        for i, name in enumerate(parts):
            nxt = open_child(
                root, cur, name, flags if i == last else O_DIR_PATH, parts[: i + 1], action
            )
            if cur != top:
                os.close(cur)
            cur = nxt
    except BaseException:
        if cur != top:
            os.close(cur)
        raise
    return cur


def raise_resolved(root: Handle, err: int | None, parts: Components, action: str) -> NoReturn:
    """:func:`raise_typed` for a failed openat2 of the whole path ``parts``.

    The kernel does not say which component it refused. For a link, a mount or a file in
    the way, the leading part at fault is looked up afterwards, one ``lstat`` per component
    (the refusal is already done: this only words the message, and a change meanwhile can
    only make it name the whole path). A bind mount of the same filesystem has the root's
    st_dev, so for one of those the whole path is named.
    """
    if err in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR) and len(parts) > 1:
        for i in range(1, len(parts)):
            try:
                st = os.stat("/".join(parts[:i]), dir_fd=root.fd, follow_symlinks=False)
            except OSError:
                break
            if stat.S_ISLNK(st.st_mode) or st.st_dev != root.dev or not stat.S_ISDIR(st.st_mode):
                raise_typed(err, rel_path(parts[:i]), action)
    raise_typed(err, rel_path(parts), action)


def release(root: Handle, fd: int) -> None:
    if fd != root.fd:
        os.close(fd)


def make_dirs(root: Handle, parts: Components, action: str, made: Made) -> int:
    """``mkdir -p``: an O_PATH descriptor on ``parts``, creating missing directories one
    step at a time, each opened without following links before going further. Each
    directory this call created is appended to ``made`` (path, inode), shallowest first, so
    that a failure later can take exactly those back (:func:`unmake_dirs`)."""
    top = root.fd
    cur = top
    try:
        for i, name in enumerate(parts):
            sub = parts[: i + 1]
            try:
                nxt = open_child(root, cur, name, O_DIR_PATH, sub, action)
            except NotFound:
                created = True
                try:
                    os.mkdir(name, DIR_MODE, dir_fd=cur)
                except FileExistsError:
                    created = False  # made meanwhile by someone else: open what is there
                except OSError as exc:
                    raise_typed(exc.errno, rel_path(sub), action)
                nxt = open_child(root, cur, name, O_DIR_PATH, sub, action)
                if created:
                    try:
                        made.append((sub, inode(os.fstat(nxt))))
                    except OSError as exc:
                        os.close(nxt)
                        raise_typed(exc.errno, rel_path(sub), action)
            if cur != top:
                os.close(cur)
            cur = nxt
    except BaseException:
        if cur != top:
            os.close(cur)
        raise
    return cur


def unmake_dirs(root: Handle, made: Made) -> None:
    """Best effort, after a failed operation: remove the directories it created, deepest
    first, each only if it is still the inode made and still empty (``rmdir`` never
    removes content). Stops at the first one that cannot go: its parents hold it.

    The identity check and the rmdir are two steps: an *empty* directory swapped in
    between (by someone with write access, in microseconds) would be removed instead.
    """
    for sub, made_inode in reversed(made):
        try:
            parent = open_dir(root, sub[:-1], O_DIR_PATH, "clean up")
        except SandboxError:
            return
        try:
            st = lstat_at(parent, sub[-1])
            if not stat.S_ISDIR(st.st_mode) or inode(st) != made_inode:
                return
            os.rmdir(sub[-1], dir_fd=parent)
        except OSError:
            return  # not empty any more (someone wrote there), or gone: leave the rest
        finally:
            release(root, parent)


def parent_dir(
    root: Handle, parts: Components, make_parents: bool, action: str, made: Made | None = None
) -> int:
    """The parent directory of ``parts`` (release with :func:`release`), created first with
    ``make_parents`` (those made recorded in ``made``)."""
    if make_parents:
        return make_dirs(root, parts[:-1], action, [] if made is None else made)
    return open_dir(root, parts[:-1], O_DIR_PATH, action)


def lstat_leaf(root: Handle, dirfd: int, parts: Components, action: str) -> os.stat_result:
    try:
        st = lstat_at(dirfd, parts[-1])
    except OSError as exc:
        raise_typed(exc.errno, rel_path(parts), action)
    if root.resolver == "walk" and not stat.S_ISLNK(st.st_mode):
        check_dev(root, st, parts, action)
    return st


# --- regular files ------------------------------------------------------------------------


def open_regular(
    root: Handle, dirfd: int, parts: Components, action: str, *, hardlinks_ok: bool
) -> tuple[int, os.stat_result]:
    """Open the regular file ``parts[-1]`` below its parent ``dirfd`` for reading."""
    try:
        if root.resolver == "openat2":
            fd = open_read(dirfd, parts[-1])
        else:
            fd = os.open(parts[-1], O_READ, dir_fd=dirfd)
    except OSError as exc:
        raise_typed(exc.errno, rel_path(parts), action)
    return fd, regular_stat(root, fd, parts, action, hardlinks_ok)


def regular_stat(
    root: Handle, fd: int, parts: Components, action: str, hardlinks_ok: bool
) -> os.stat_result:
    """fstat the freshly opened ``fd``, which must be a regular file; closes it if not."""
    try:
        st = os.fstat(fd)
        if root.resolver == "walk":
            check_dev(root, st, parts, action)
        if not stat.S_ISREG(st.st_mode):
            what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise NotARegularFile(
                f"cannot {action} '{rel_path(parts)}': it is {what}", path=rel_path(parts)
            )
        if st.st_nlink > 1 and not hardlinks_ok:
            raise HardLinked(
                f"cannot {action} '{rel_path(parts)}': the file has {st.st_nlink} hard links "
                "and may be shared with a file outside the workspace",
                path=rel_path(parts),
            )
    except BaseException:
        os.close(fd)
        raise
    return st


def read_fd(fd: int, st: os.stat_result, max_bytes: int, parts: Components) -> bytes:
    """The content behind ``fd``, whose ``fstat`` is ``st``: at most ``max_bytes`` bytes
    (:class:`TooLarge` before reading if ``st`` says more, or once it grows past that)."""
    size = st.st_size
    if size > max_bytes:
        raise TooLarge(
            f"cannot read '{rel_path(parts)}': {size} bytes is over the limit of {max_bytes}",
            path=rel_path(parts),
        )
    # Ask for one byte more than fstat said (size + 1 <= max_bytes + 1): getting exactly
    # size bytes back is EOF on a local filesystem, the common case, in one syscall.
    try:
        chunk = os.read(fd, size + 1)
    except OSError as exc:
        raise_typed(exc.errno, rel_path(parts), "read")
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
            raise_typed(exc.errno, rel_path(parts), "read")
        chunks.append(chunk)
        total += len(chunk)
    if total > max_bytes:
        raise TooLarge(
            f"cannot read '{rel_path(parts)}': it grew past the limit of {max_bytes} bytes",
            path=rel_path(parts),
        )
    return b"".join(chunks)


# --- listing ------------------------------------------------------------------------------


def scan(fd: int, parts: Components, limit: int | None) -> list[tuple[str, os.stat_result]]:
    """Sorted (name, lstat) of the open directory ``fd``; LimitExceeded past ``limit``
    names. Names removed between listing and lstat are left out."""
    names: list[str] = []
    try:
        with os.scandir(fd) as it:  # scandir dups fd and closes its copy
            for entry in it:
                names.append(entry.name)
                if limit is not None and len(names) > limit:
                    raise LimitExceeded(
                        f"cannot list '{rel_path(parts)}': more entries than the limit",
                        path=rel_path(parts),
                    )
    except OSError as exc:
        raise_typed(exc.errno, rel_path(parts), "list")
    names.sort()
    out: list[tuple[str, os.stat_result]] = []
    for name in names:
        try:
            st = lstat_at(fd, name)
        except FileNotFoundError:
            continue  # removed since it was listed
        except OSError as exc:
            raise_typed(exc.errno, rel_path((*parts, name)), "list")
        out.append((name, st))
    return out
