"""Layer 2's writes: temp files, no-replace renames and confirmed removes.

Private to :mod:`sandbox.root`, whose :class:`~sandbox.root.Root` states the contract this
code keeps (its "Guarantees" list: atomic create and update, never writing through a link,
temp files locked for their whole life and swept by exact name). Here are the steps:
writing a hidden temp file beside the target, checking it is still ours, giving it the
final name without replacing anything (``renameat2(RENAME_NOREPLACE)``, with the fallbacks
where that flag is missing), and hiding and verifying before a confirmed unlink. The names
those hidden files get, and the sweep of what a killed write or delete left, are
:mod:`sandbox._leftovers`.

Like :mod:`sandbox._resolve`, the functions take the Root's directory handle (for its
resolver and st_dev) and return ``os.stat_result``; ``root.py`` holds the checks of the
arguments, the life-cycle accounting and the policy constants.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time

from sandbox import _linux
from sandbox._errno import raise_typed, rel_path
from sandbox._handle import Handle
from sandbox._info import FileIdentity
from sandbox._leftovers import RANDOM_NAME_ATTEMPTS, REMOVE_PREFIX, TEMP_PREFIX, random_name
from sandbox._resolve import (
    DIR_MODE,
    O_DIR_PATH,
    O_DIR_READ,
    Made,
    inode,
    lstat_at,
    lstat_leaf,
    open_dir,
    open_regular,
    parent_dir,
    release,
    unmake_dirs,
)
from sandbox.errors import AlreadyExists, IdentityMismatch, SandboxError
from sandbox.uri import Components

# How often update() polls a flock held by another process of ours (the total wait is
# root.FLOCK_TIMEOUT_S); each holder takes milliseconds.
_FLOCK_POLL_S = 0.002

_O_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# New files: 0o666 narrowed by the process umask, like every other Unix program; temp files
# for updates start private and get the original's bits by fchmod.
FILE_MODE = 0o666
TEMP_MODE = 0o600


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(dirfd: int) -> None:
    # fsync needs a real descriptor; an O_PATH one gives EBADF.
    fd = os.open(".", O_DIR_READ, dir_fd=dirfd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _same_inode(st: os.stat_result, expect: FileIdentity) -> bool:
    return st.st_dev == expect.dev and st.st_ino == expect.ino


# --- create -------------------------------------------------------------------------------


def create_in(parent: int, parts: Components, data: bytes) -> os.stat_result:
    """Root.create below its resolved ``parent``: temp file, fsync, no-replace rename,
    fsync of the directory. Returns the new file's fstat."""
    name = parts[-1]
    rel = rel_path(parts)
    # Fail before writing megabytes when the name is visibly taken; the no-replace
    # rename below is what makes the refusal certain.
    try:
        lstat_at(parent, name)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise_typed(exc.errno, rel, "create")
    else:
        raise_typed(errno.EEXIST, rel, "create")
    tmp, tfd = _open_temp(parent, parts, "create", FILE_MODE)
    placed = False
    try:
        try:
            _write_all(tfd, data)
            os.fsync(tfd)
        except OSError as exc:
            raise_typed(exc.errno, rel, "create")
        _check_temp(parent, tmp, tfd, rel, "create")
        _place_new(parent, tmp, name, rel)
        placed = True
        try:
            st = os.fstat(tfd)
            _fsync_dir(parent)
        except OSError as exc:
            raise_typed(exc.errno, rel, "create")
        return st
    finally:
        if not placed:
            _unlink_if_same(parent, tmp, tfd)
        os.close(tfd)  # releases the temp file's flock


def _check_temp(parent: int, tmp: str, tfd: int, rel: str, action: str) -> None:
    """The temp name must still be the inode we wrote (nobody else knows the name, but
    anyone who can write the directory could swap it); microseconds before the rename."""
    try:
        same = inode(lstat_at(parent, tmp)) == inode(os.fstat(tfd))
    except OSError as exc:
        raise_typed(exc.errno, rel, action)
    if not same:
        raise IdentityMismatch(
            f"cannot {action} '{rel}': its temporary file was replaced while being "
            "written; nothing was written",
            path=rel,
        )


def _place_new(parent: int, tmp: str, name: str, rel: str) -> None:
    """Give the temp file ``tmp`` the name ``name`` in the same directory, never replacing
    whatever holds ``name`` (EEXIST becomes :class:`AlreadyExists`)."""
    try:
        _linux.renameat2(parent, tmp, parent, name, _linux.RENAME_NOREPLACE)
        return
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EINVAL):
            raise_typed(exc.errno, rel, "create")
    # No renameat2, or a filesystem refusing RENAME_NOREPLACE: link() never replaces.
    # A crash between link and unlink leaves the complete note plus its temp name, which
    # the stale-temp sweep removes (the note keeps its own name); filesystems without
    # hard links refuse with an error and nothing is created.
    try:
        os.link(tmp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        raise_typed(exc.errno, rel, "create")
    # The note is in place either way; an extra name left here is swept later.
    with contextlib.suppress(OSError):
        os.unlink(tmp, dir_fd=parent)


def _unlink_if_same(dirfd: int, name: str, fd: int) -> None:
    """Best-effort cleanup: remove ``name`` only if it is still the inode behind ``fd``."""
    try:
        if inode(os.fstat(fd)) == inode(lstat_at(dirfd, name)):
            os.unlink(name, dir_fd=dirfd)
    except OSError:
        pass


def _open_temp(parent: int, parts: Components, action: str, mode: int) -> tuple[str, int]:
    """A new hidden temp file in ``parent``, opened for writing and ``flock``-ed.

    The exclusive flock, held until the descriptor is closed (after the rename or the
    unlink), is what tells :meth:`Root.remove_stale_temps` in any process that the file is
    live. It can only be taken after the file exists, so a sweeper may get between the
    two and remove the brand-new file: the name is then checked to still be our inode
    once the lock is held, and a fresh name is tried if it is not.
    """
    for _ in range(RANDOM_NAME_ATTEMPTS):
        tmp = random_name(TEMP_PREFIX)
        try:
            fd = os.open(tmp, _O_CREATE, mode, dir_fd=parent)
        except FileExistsError:
            continue
        except OSError as exc:
            raise_typed(exc.errno, rel_path(parts), action)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if inode(lstat_at(parent, tmp)) == inode(os.fstat(fd)):
                return tmp, fd
        except (BlockingIOError, FileNotFoundError):
            pass  # a sweeper holds it or took it: it removes that one, we take another
        except OSError as exc:
            _unlink_if_same(parent, tmp, fd)
            os.close(fd)
            raise_typed(exc.errno, rel_path(parts), action)
        except BaseException:
            _unlink_if_same(parent, tmp, fd)
            os.close(fd)
            raise
        os.close(fd)
    raise_typed(errno.EEXIST, rel_path(parts), action)


# --- update -------------------------------------------------------------------------------


def lock_current(
    root: Handle, parent: int, parts: Components, timeout_s: float
) -> tuple[int, os.stat_result]:
    """Open and flock the file now at ``parts[-1]``, making sure the lock is on the inode
    the name refers to after locking (a previous holder may have renamed over it). Gives
    up with "busy" (EWOULDBLOCK) after ``timeout_s``; closing the descriptor unlocks."""
    name = parts[-1]
    deadline = time.monotonic() + timeout_s
    while True:
        fd, st = open_regular(root, parent, parts, "update", hardlinks_ok=False)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise_typed(errno.EWOULDBLOCK, rel_path(parts), "update")
                    time.sleep(_FLOCK_POLL_S)
                except OSError as exc:
                    raise_typed(exc.errno, rel_path(parts), "update")
            try:
                now = lstat_at(parent, name)
            except OSError as exc:
                raise_typed(exc.errno, rel_path(parts), "update")
            if inode(now) == inode(st):
                return fd, os.fstat(fd)  # fstat again: the holder before us may have written
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # locked a file that was renamed over meanwhile: queue on the new one
        if time.monotonic() > deadline:
            raise_typed(errno.EWOULDBLOCK, rel_path(parts), "update")


def write_over(parent: int, parts: Components, st: os.stat_result, data: bytes) -> os.stat_result:
    """Replace the file at ``parts[-1]``, whose fstat (taken under our lock) was ``st``, by
    ``data``: temp file with its permission bits, fsync, rename over the name only if the
    name still is that inode, fsync of the directory. Returns the new file's fstat."""
    name = parts[-1]
    rel = rel_path(parts)
    tmp, tfd = _open_temp(parent, parts, "update", TEMP_MODE)
    renamed = False
    try:
        try:
            os.fchmod(tfd, stat.S_IMODE(st.st_mode) & 0o777)
            _write_all(tfd, data)
            os.fsync(tfd)
        except OSError as exc:
            raise_typed(exc.errno, rel, "update")
        try:
            now = lstat_at(parent, name)
        except OSError as exc:
            raise_typed(exc.errno, rel, "update")
        if inode(now) != inode(st):
            raise IdentityMismatch(
                f"cannot update '{rel}': it was replaced by another file while being "
                "updated; nothing was written",
                path=rel,
            )
        try:
            os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as exc:
            raise_typed(exc.errno, rel, "update")
        renamed = True
        try:
            new = os.fstat(tfd)
            _fsync_dir(parent)
        except OSError as exc:
            raise_typed(exc.errno, rel, "update")
        return new
    finally:
        if not renamed:
            _unlink_if_same(parent, tmp, tfd)
        os.close(tfd)


# --- directories, unlink, move ------------------------------------------------------------


def mkdir(root: Handle, parts: Components, parents: bool, exist_ok: bool) -> None:
    """Root.mkdir after its checks (see there)."""
    made: Made = []
    try:
        parent = parent_dir(root, parts, parents, "create directory", made)
        try:
            try:
                os.mkdir(parts[-1], DIR_MODE, dir_fd=parent)
            except FileExistsError:
                if exist_ok:
                    st = lstat_leaf(root, parent, parts, "create directory")
                    if stat.S_ISDIR(st.st_mode):
                        return
                raise_typed(errno.EEXIST, rel_path(parts), "create directory")
            except OSError as exc:
                raise_typed(exc.errno, rel_path(parts), "create directory")
        finally:
            release(root, parent)
    except BaseException:
        unmake_dirs(root, made)
        raise


def unlink(root: Handle, parts: Components) -> None:
    """Root.unlink after its checks (see there)."""
    parent = open_dir(root, parts[:-1], O_DIR_PATH, "remove")
    try:
        os.unlink(parts[-1], dir_fd=parent)
    except OSError as exc:
        raise_typed(exc.errno, rel_path(parts), "remove")
    finally:
        release(root, parent)


def rmdir(root: Handle, parts: Components) -> None:
    """Root.rmdir after its checks (see there)."""
    parent = open_dir(root, parts[:-1], O_DIR_PATH, "remove directory")
    try:
        os.rmdir(parts[-1], dir_fd=parent)
    except OSError as exc:
        # POSIX lets rmdir report a non-empty directory as EEXIST too.
        err = errno.ENOTEMPTY if exc.errno == errno.EEXIST else exc.errno
        raise_typed(err, rel_path(parts), "remove directory")
    finally:
        release(root, parent)


def move(
    root: Handle,
    src: Components,
    dst: Components,
    make_parents: bool,
    expect: FileIdentity | None,
) -> os.stat_result:
    """Root.move after its checks (see there); returns the lstat of the moved entry."""
    sparent = open_dir(root, src[:-1], O_DIR_PATH, "move")
    try:
        made: Made = []
        moved = False
        try:
            dparent = parent_dir(root, dst, make_parents, "move", made)
            try:
                if expect is not None:
                    st = lstat_leaf(root, sparent, src, "move")
                    if not _same_inode(st, expect):
                        raise IdentityMismatch(
                            f"cannot move '{rel_path(src)}': it is no longer the confirmed file",
                            path=rel_path(src),
                        )
                rename_noreplace(root, sparent, src, dparent, dst, "move")
                moved = True
                return lstat_leaf(root, dparent, dst, "move")
            finally:
                release(root, dparent)
        except BaseException:
            if not moved:
                unmake_dirs(root, made)
            raise
    finally:
        release(root, sparent)


def rename_noreplace(
    root: Handle,
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
            raise_typed(exc.errno, _blamed(exc.errno, src, dst), action)
    # Fallback: no renameat2, or a filesystem that does not support RENAME_NOREPLACE.
    if fresh_dst:
        try:
            os.rename(sname, dname, src_dir_fd=sdir, dst_dir_fd=ddir)
        except OSError as exc:
            raise_typed(exc.errno, _blamed(exc.errno, src, dst), action)
        return
    st = lstat_leaf(root, sdir, src, action)
    if stat.S_ISDIR(st.st_mode):
        # No atomic no-replace for directories: check, then rename. rename(2) can only
        # replace an *empty* directory, so that is all a concurrent creator could lose.
        try:
            lstat_at(ddir, dname)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise_typed(exc.errno, rel_path(dst), action)
        else:
            raise_typed(errno.EEXIST, rel_path(dst), action)
        try:
            os.rename(sname, dname, src_dir_fd=sdir, dst_dir_fd=ddir)
        except OSError as exc:
            raise_typed(exc.errno, _blamed(exc.errno, src, dst), action)
        return
    # Files and symlinks: link() never replaces (EEXIST); then drop the source name, but
    # only if it still is the inode just linked (else something was swapped in there:
    # leave both names and say so rather than unlink a file we did not move).
    try:
        os.link(sname, dname, src_dir_fd=sdir, dst_dir_fd=ddir, follow_symlinks=False)
    except OSError as exc:
        raise_typed(exc.errno, _blamed(exc.errno, src, dst), action)
    try:
        same = inode(lstat_at(sdir, sname)) == inode(lstat_at(ddir, dname))
        if same:
            os.unlink(sname, dir_fd=sdir)
    except OSError as exc:
        raise_typed(exc.errno, rel_path(src), action)
    if not same:
        raise IdentityMismatch(
            f"cannot {action} '{rel_path(src)}': it was replaced while being moved; the "
            f"original is now at '{rel_path(dst)}' and the replacement was left in place",
            path=rel_path(src),
        )


def _blamed(err: int | None, src: Components, dst: Components) -> str:
    """Which operand a failed rename (or link) is refused on, for the error's path.

    EEXIST: the destination's name is taken. EXDEV: the two are on different mounts; both
    were resolved below the root already, so this is a bind mount of the same filesystem
    that only the walk resolver misses (openat2's RESOLVE_NO_XDEV refused any mount on
    either side before). The destination is the new place the caller chose and the source
    was just opened through the same checks, so the destination is named; a bind mount at
    the *source* under the walk would be named wrongly (the kernel does not say which side,
    and the mount ids that would tell are in /proc, which the jail closes). Anything else
    is about the source.
    """
    return rel_path(dst if err in (errno.EEXIST, errno.EXDEV) else src)


# --- confirmed remove ---------------------------------------------------------------------


def remove(root: Handle, parts: Components, expect: FileIdentity) -> None:
    """Root.remove after its checks (see there for the steps and the residual window)."""
    parent = open_dir(root, parts[:-1], O_DIR_PATH, "delete")
    try:
        _remove_in(root, parent, parts, expect)
    finally:
        release(root, parent)


def _remove_in(root: Handle, parent: int, parts: Components, expect: FileIdentity) -> None:
    rel = rel_path(parts)
    # The confirmed inode's number rides in the name, so that a leftover of a delete
    # killed before its unlink can be told from an object deliberately left here (one
    # that was NOT the confirmed file, below): see sweep.
    hidden = f"{random_name(REMOVE_PREFIX)}-{expect.ino:x}"
    hidden_parts = (*parts[:-1], hidden)
    rename_noreplace(root, parent, parts, parent, hidden_parts, "delete", fresh_dst=True)
    try:
        st = lstat_at(parent, hidden)
    except OSError as exc:
        raise_typed(exc.errno, rel, "delete")
    if stat.S_ISREG(st.st_mode) and _same_inode(st, expect):
        try:
            os.unlink(hidden, dir_fd=parent)
        except OSError as exc:
            raise_typed(exc.errno, rel, "delete")
        return
    try:
        rename_noreplace(root, parent, hidden_parts, parent, parts, "delete")
    except AlreadyExists:
        raise IdentityMismatch(
            f"cannot delete '{rel}': it is no longer the confirmed file, and the name was "
            "taken again meanwhile, so the object found there was left as "
            f"'{rel_path(hidden_parts)}'",
            path=rel,
        ) from None
    except SandboxError as exc:
        raise IdentityMismatch(
            f"cannot delete '{rel}': it is no longer the confirmed file, and putting it back "
            f"failed ({exc.message}); it was left as '{rel_path(hidden_parts)}'",
            path=rel,
        ) from None
    raise IdentityMismatch(
        f"cannot delete '{rel}': it is no longer the confirmed file; nothing was removed",
        path=rel,
    )
