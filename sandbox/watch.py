"""Change hints for directories below a :class:`~sandbox.root.Root`, from inotify.

A watch is added by descriptor: the directory is resolved below the Root like every other
operation (no symlink, no mount crossing) and the watch is placed on that very directory
through ``/proc/self/fd/N``, the kernel's name for the open descriptor; no workspace path
string is resolved anywhere. Events name the watched directory by the components it was
added with, plus the entry name the kernel reports.

Hints only, by design: inotify drops events when its queue overflows (reported as
:attr:`WatchEvent.overflow`), needs one watch per directory out of a per-user budget
(``/proc/sys/fs/inotify/max_user_watches``), reports nothing for changes made through
another kernel (NFS, SMB, the bind mounts of Docker Desktop on macOS and Windows), and
cannot work where ``/proc`` is not mounted. Whoever uses it must keep a rescan as the ground
truth; nothing here reads a file.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

from sandbox.errors import SandboxError
from sandbox.root import Root
from sandbox.uri import Components

# include/uapi/linux/inotify.h
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# What a notes index needs to hear: entries appearing, disappearing, renamed, rewritten
# (close after write), or changing type/permissions. IN_MODIFY is left out: an editor's
# write fires it per write() call, and the IN_CLOSE_WRITE that follows says the same once.
NOTE_EVENTS = (
    IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_EXCL_UNLINK
    | IN_ONLYDIR
)

_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name
# One read returns as many whole events as fit; 64 KiB holds hundreds (the kernel's queue
# itself is bounded by /proc/sys/fs/inotify/max_queued_events, 16384 by default).
_READ_BYTES = 64 * 1024
PROC_FD = Path("/proc/self/fd")


@dataclass(frozen=True, slots=True)
class WatchEvent:
    token: Hashable | None  # what the directory was added with (None for an overflow)
    parts: Components  # the watched directory
    name: str | None  # the entry inside it, when the event is about an entry
    mask: int

    @property
    def overflow(self) -> bool:
        return bool(self.mask & IN_Q_OVERFLOW)

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & IN_ISDIR)

    @property
    def gone(self) -> bool:
        return bool(self.mask & (IN_DELETE | IN_MOVED_FROM))


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


def max_user_watches() -> int | None:
    """The per-user inotify watch budget of this kernel, if readable."""
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    except (OSError, ValueError):
        return None


class WatchUnavailable(Exception):
    """inotify cannot be used here (no syscall, no /proc, or no instance left)."""


class DirectoryWatcher:
    """One inotify instance watching directories below one or more Roots.

    Thread-safe: directories may be added from a scanning thread while another thread
    reads events. At most ``budget`` directories are watched; past that :meth:`add` returns
    False (the caller's rescan covers the rest) and :attr:`exhausted` says so.
    """

    def __init__(self, budget: int) -> None:
        libc = _libc()
        if libc is None:
            raise WatchUnavailable("inotify is not available in this C library")
        if not PROC_FD.is_dir():
            raise WatchUnavailable("/proc is not mounted (watches are added by descriptor)")
        fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
        if fd < 0:
            err = ctypes.get_errno()
            raise WatchUnavailable(f"inotify_init1 failed: {os.strerror(err)}")
        self._libc = libc
        self._fd = fd
        self.budget = budget
        self.exhausted = False
        self._lock = threading.Lock()
        self._by_wd: dict[int, tuple[Hashable, Components]] = {}
        self._by_dir: dict[tuple[Hashable, Components], int] = {}

    def fileno(self) -> int:
        return self._fd

    @property
    def watches(self) -> int:
        with self._lock:
            return len(self._by_wd)

    def add(self, root: Root, parts: Components, token: Hashable) -> bool:
        """Watch the directory ``parts`` below ``root``; events carry ``token`` and ``parts``.

        False when the budget (ours or the kernel's) is spent or the directory cannot be
        resolved (gone, a symlink, a mount): no watch then, the rescan covers it.
        """
        with self._lock:
            if (token, parts) in self._by_dir:
                return True
            if len(self._by_wd) >= self.budget:
                self.exhausted = True
                return False
        try:
            wd = root.add_watch(self._add_watch, parts, NOTE_EVENTS)
        except SandboxError:
            return False
        except OSError as exc:
            if exc.errno == errno.ENOSPC:  # the kernel's max_user_watches
                self.exhausted = True
            return False
        with self._lock:
            old = self._by_wd.get(wd)
            if old is not None:
                # The same inode under a new name (a renamed directory): the new name wins.
                self._by_dir.pop(old, None)
            self._by_wd[wd] = (token, parts)
            self._by_dir[(token, parts)] = wd
        return True

    def _add_watch(self, dirfd: int, mask: int) -> int:
        path = f"{PROC_FD}/{dirfd}".encode()
        wd = int(self._libc.inotify_add_watch(self._fd, path, mask))
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return wd

    def drop_below(self, token: Hashable, parts: Components) -> None:
        """Stop watching ``parts`` and every directory below it (it was moved or removed)."""
        with self._lock:
            doomed = [
                (key, wd)
                for key, wd in self._by_dir.items()
                if key[0] == token and key[1][: len(parts)] == parts
            ]
            for key, wd in doomed:
                del self._by_dir[key]
                self._by_wd.pop(wd, None)
        for _key, wd in doomed:
            self._libc.inotify_rm_watch(self._fd, wd)  # EINVAL if already gone: fine

    def drop_token(self, token: Hashable) -> None:
        """Stop watching everything added with ``token``."""
        self.drop_below(token, ())

    def read(self) -> list[WatchEvent]:
        """The events queued now ([] when none; never blocks)."""
        try:
            data = os.read(self._fd, _READ_BYTES)
        except BlockingIOError:
            return []
        events: list[WatchEvent] = []
        offset = 0
        with self._lock:
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size : offset + _EVENT.size + size]
                offset += _EVENT.size + size
                if mask & IN_Q_OVERFLOW:
                    events.append(WatchEvent(None, (), None, mask))
                    continue
                where = self._by_wd.get(wd)
                if where is None:
                    continue  # a watch dropped meanwhile
                if mask & IN_IGNORED:
                    self._by_wd.pop(wd, None)
                    self._by_dir.pop(where, None)
                    continue
                name = raw.split(b"\0", 1)[0]
                try:
                    decoded = name.decode("utf-8") if name else None
                except UnicodeDecodeError:
                    continue  # not a name any URI can hold: never a note
                events.append(WatchEvent(where[0], where[1], decoded, mask))
        return events

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._by_wd.clear()
            self._by_dir.clear()
