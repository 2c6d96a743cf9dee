"""Layer 2's own leftovers: the hidden names of our temp and remove files, and their sweep.

Private to :mod:`sandbox.root` (whose :meth:`~sandbox.root.Root.remove_stale_temps` states
exactly what goes). A write keeps its data in a hidden temp file until the rename, and a
confirmed delete hides the file before unlinking it; a process killed in between leaves such
a name behind. The names carry a random part (and a remove name the confirmed inode), so that
exactly our own leftovers, and nothing else, are ever swept.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import stat
import time

from sandbox._errno import raise_typed, rel_path
from sandbox._handle import Handle
from sandbox._resolve import O_DIR_READ, inode, lstat_at, open_regular
from sandbox.errors import SandboxError
from sandbox.uri import Components

__all__ = [
    "RANDOM_NAME_ATTEMPTS",
    "REMOVE_PREFIX",
    "TEMP_PREFIX",
    "is_leftover_name",
    "random_name",
    "sweep",
    "sweep_if_due",
]

# Hidden names for our own short-lived files, recognisable so listings can skip them and an
# operator can tell what a leftover is (a crash between create and rename leaves one).
TEMP_PREFIX = ".fsnotes-tmp-"
REMOVE_PREFIX = ".fsnotes-rm-"
# 64 random bits per name: O_EXCL catches a collision, and a few attempts make a repeated
# one (or a name squatted by someone guessing) fail loudly instead of looping.
_RANDOM_NAME_BYTES = 8
RANDOM_NAME_ATTEMPTS = 4
# Exactly the names we make, and nothing else, are ever swept (Root.remove_stale_temps): a
# temp is the prefix and the random hex; a remove name also carries, after a '-', the inode
# number (hex) of the file the person confirmed for deletion.
_RANDOM_HEX = f"[0-9a-f]{{{2 * _RANDOM_NAME_BYTES}}}"
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + _RANDOM_HEX)
_REMOVE_NAME = re.compile(re.escape(REMOVE_PREFIX) + _RANDOM_HEX + "-([0-9a-f]{1,16})")

# Directories remembered for the writers' sweep rate limit (root.SWEEP_INTERVAL_S); the
# table is simply cleared when full.
_SWEEP_MEMORY = 4096


def is_leftover_name(name: str) -> bool:
    """Whether ``name`` is one of our own hidden temp or remove names (the exact pattern),
    i.e. a candidate for :meth:`Root.remove_stale_temps` in the directory holding it."""
    return _TEMP_NAME.fullmatch(name) is not None or _REMOVE_NAME.fullmatch(name) is not None


def random_name(prefix: str) -> str:
    return prefix + secrets.token_hex(_RANDOM_NAME_BYTES)


def sweep_if_due(
    root: Handle, parent: int, parts: Components, interval_s: float, grace_s: float
) -> None:
    """The writers' sweep of the directory ``parent`` they wrote in: best effort, at most
    once per ``interval_s`` per directory and Root, never failing the write."""
    try:
        st = os.fstat(parent)
    except OSError:
        return
    key = (st.st_dev, st.st_ino)
    now = time.monotonic()
    with root.lock:
        last = root.swept.get(key)
        if last is not None and now - last < interval_s:
            return
        if len(root.swept) >= _SWEEP_MEMORY:
            root.swept.clear()
        root.swept[key] = now
    try:
        fd = os.open(".", O_DIR_READ, dir_fd=parent)
    except OSError:
        return
    try:
        sweep(root, fd, parts, grace_s)
    except (OSError, SandboxError):
        pass
    finally:
        os.close(fd)


def sweep(root: Handle, dirfd: int, parts: Components, grace_s: float) -> int:
    """Remove our leftovers in the open directory ``dirfd`` (``parts``, for messages);
    remove names count as leftovers once older than ``grace_s`` (see
    :meth:`Root.remove_stale_temps` for exactly what goes). Returns how many went."""
    try:
        with os.scandir(dirfd) as it:  # scandir dups fd and closes its copy
            names = [e.name for e in it if e.name.startswith((TEMP_PREFIX, REMOVE_PREFIX))]
    except OSError as exc:
        raise_typed(exc.errno, rel_path(parts), "clean up")
    removed = 0
    for name in names:
        if _TEMP_NAME.fullmatch(name):
            removed += _remove_stale_temp(root, dirfd, parts, name)
        elif (match := _REMOVE_NAME.fullmatch(name)) is not None:
            removed += _remove_confirmed_leftover(root, dirfd, name, int(match[1], 16), grace_s)
    return removed


def _remove_stale_temp(root: Handle, dirfd: int, parts: Components, name: str) -> bool:
    try:
        fd, st = open_regular(root, dirfd, (*parts, name), "clean up", hardlinks_ok=True)
    except SandboxError:
        return False  # a symlink, FIFO, directory, mount, unreadable, or gone
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer holds it
        try:
            if inode(lstat_at(dirfd, name)) != inode(st):
                return False
            os.unlink(name, dir_fd=dirfd)
        except OSError:
            return False
        return True
    finally:
        os.close(fd)  # releases our lock


def _remove_confirmed_leftover(
    root: Handle, dirfd: int, name: str, ino: int, grace_s: float
) -> bool:
    try:
        st = lstat_at(dirfd, name)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_ino != ino:
        return False  # deliberately left by remove(), or not ours at all
    if root.resolver == "walk" and st.st_dev != root.dev:
        return False
    if time.time() - st.st_ctime < grace_s:
        return False  # a delete in flight may still unlink it itself
    try:
        os.unlink(name, dir_fd=dirfd)
    except OSError:
        return False
    return True
