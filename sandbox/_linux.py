"""The few raw Linux syscalls the sandbox needs and the stdlib lacks, via ctypes.

``openat2(2)`` (Linux 5.6+) has no wrapper in any CPython; ``renameat2(2)`` (Linux 3.15+)
neither. Both are reached through glibc: ``renameat2`` as the libc function (glibc 2.28+)
or the raw syscall, ``openat2`` as the raw syscall. Errors are raised as :class:`OSError`
with the errno; the caller (:mod:`sandbox._resolve`) maps them to typed errors.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
import threading
from collections.abc import Callable
from typing import Any

# include/uapi/linux/openat2.h
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

# include/uapi/linux/fs.h
RENAME_NOREPLACE = 1 << 0
RENAME_EXCHANGE = 1 << 1

# openat2 is 437 on every architecture using the unified syscall table (x86_64, aarch64,
# riscv64, arm, i386, ppc, s390x); alpha, mips and ia64 number differently and are not
# supported: there the probe fails and the sandbox uses the component walk.
_NR_OPENAT2_BY_MACHINE = {
    "x86_64": 437,
    "aarch64": 437,
    "riscv64": 437,
    "armv7l": 437,
    "armv8l": 437,
    "i686": 437,
    "i386": 437,
    "ppc64le": 437,
    "ppc64": 437,
    "s390x": 437,
}
# renameat2 predates the unified numbering, so it differs per architecture. Only used when
# the libc function is missing (glibc < 2.28, some musl builds).
_NR_RENAMEAT2_BY_MACHINE = {
    "x86_64": 316,
    "aarch64": 276,
    "riscv64": 276,
    "armv7l": 382,
    "armv8l": 382,
    "i686": 353,
    "i386": 353,
    "ppc64le": 357,
    "ppc64": 357,
    "s390x": 347,
}

# openat2 refuses a scoped ('..'-containing) lookup with EAGAIN when any rename or mount
# happened system-wide during the walk, and leaves retrying to userspace. cap-std retries 4
# times; 8 keeps us correct under a busy system while still bounding the work per call.
# The sandbox never passes '..', so in practice EAGAIN does not occur at all.
OPENAT2_EAGAIN_RETRIES = 8

# struct open_how { __u64 flags; __u64 mode; __u64 resolve; } (OPEN_HOW_SIZE_VER0 = 24).


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_OPEN_HOW_SIZE = ctypes.sizeof(_OpenHow)

# A private CDLL instance so that the argtypes set here never clash with other users of
# libc.syscall in the same process.
_libc = ctypes.CDLL(None, use_errno=True)
_machine = platform.machine()

_NR_OPENAT2 = _NR_OPENAT2_BY_MACHINE.get(_machine)
# No argtypes on purpose: per-call argtypes conversion doubles the cost of this, the hottest
# call in the sandbox. Instead the variadic syscall(2) gets pre-built, correctly sized C
# values (a long for the number, a size_t for the size, a pointer for the struct) and two
# plain Python values that ctypes passes as int (dirfd) and char * (the bytes path).
_syscall_openat2 = _libc.syscall
_syscall_openat2.restype = ctypes.c_long
_c_nr_openat2 = ctypes.c_long(_NR_OPENAT2 or -1)
_c_open_how_size = ctypes.c_size_t(_OPEN_HOW_SIZE)
_FS_ENCODING = sys.getfilesystemencoding()
_FS_ERRORS = sys.getfilesystemencodeerrors()

# The open_how structs are read-only to the kernel, so one per (flags, mode, resolve) is
# shared by every call and thread (with its pointer); this keeps ctypes allocation off the
# hot path. The dict is bounded by the handful of flag combinations the sandbox uses.
_how_cache: dict[tuple[int, int, int], tuple[_OpenHow, Any]] = {}


def _openat2_with(dirfd: int, path: str, how_ref: Any) -> int:
    raw = path.encode(_FS_ENCODING, _FS_ERRORS)
    if b"\0" in raw:
        raise ValueError("embedded null byte")
    eagain = 0
    while True:
        fd: int = _syscall_openat2(_c_nr_openat2, dirfd, raw, how_ref, _c_open_how_size)
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err == errno.EINTR:
            continue
        if err == errno.EAGAIN and eagain < OPENAT2_EAGAIN_RETRIES:
            eagain += 1
            continue
        raise OSError(err, os.strerror(err))


def openat2(dirfd: int, path: str, flags: int, resolve: int, mode: int = 0) -> int:
    """``openat2(dirfd, path, {flags, mode, resolve})``; returns the new fd.

    EINTR is retried; EAGAIN is retried at most :data:`OPENAT2_EAGAIN_RETRIES` times.
    Raises :class:`OSError` (ENOSYS on architectures without a known syscall number).
    """
    if _NR_OPENAT2 is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    key = (flags, mode, resolve)
    cached = _how_cache.get(key)
    if cached is None:
        how = _OpenHow(flags, mode, resolve)
        cached = _how_cache.setdefault(key, (how, ctypes.byref(how)))
    return _openat2_with(dirfd, path, cached[1])


def opener(flags: int, resolve: int) -> Callable[[int, str], int]:
    """:func:`openat2` with fixed flags and no mode, for a hot path: ``open(dirfd, path)``."""
    if _NR_OPENAT2 is None:

        def unavailable(dirfd: int, path: str) -> int:
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

        return unavailable
    how = _OpenHow(flags, 0, resolve)
    how_ref = ctypes.byref(how)  # holds a reference to how, keeping it alive

    def open_fixed(dirfd: int, path: str) -> int:
        return _openat2_with(dirfd, path, how_ref)

    return open_fixed


def _bind_renameat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        fn = _libc.renameat2
    except AttributeError:
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_libc_renameat2 = _bind_renameat2()
_NR_RENAMEAT2 = _NR_RENAMEAT2_BY_MACHINE.get(_machine)
_syscall_renameat2 = ctypes.CDLL(None, use_errno=True).syscall
_syscall_renameat2.restype = ctypes.c_long
_syscall_renameat2.argtypes = [
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_uint,
]


def renameat2(olddirfd: int, old: str, newdirfd: int, new: str, flags: int) -> None:
    """``renameat2(olddirfd, old, newdirfd, new, flags)``; neither name is followed.

    Raises :class:`OSError`: ENOSYS where neither libc nor a known syscall number provides
    it; EINVAL where the filesystem does not support ``flags`` (e.g. NFS and
    ``RENAME_NOREPLACE``) or a directory would move into itself.
    """
    a, b = os.fsencode(old), os.fsencode(new)
    if b"\0" in a or b"\0" in b:
        raise ValueError("embedded null byte")
    while True:
        if _libc_renameat2 is not None:
            rc = int(_libc_renameat2(olddirfd, a, newdirfd, b, flags))
        elif _NR_RENAMEAT2 is not None:
            rc = int(_syscall_renameat2(_NR_RENAMEAT2, olddirfd, a, newdirfd, b, flags))
        else:
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err != errno.EINTR:
            raise OSError(err, os.strerror(err))


# --- the probe ----------------------------------------------------------------------------

_probe_lock = threading.Lock()
_probe_result: bool | None = None
_probe_errno: int | None = None


def _probe() -> tuple[bool, int | None]:
    """Open '/' beneath itself with every resolve flag the sandbox uses.

    A known-good lookup, so a failure means the syscall (or one of the flags) is not
    usable: ENOSYS (kernel < 5.6, gVisor, runc's stub for unknown syscalls), EPERM
    (seccomp profiles that predate openat2), EINVAL/E2BIG (a kernel that does not know a
    flag). Every failure selects the component walk, which is equally safe, only slower.
    """
    try:
        base = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return False, exc.errno
    try:
        fd = openat2(
            base,
            ".",
            os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        )
    except OSError as exc:
        return False, exc.errno
    finally:
        os.close(base)
    os.close(fd)
    return True, None


def openat2_available() -> bool:
    """Whether openat2 with the sandbox's resolve flags works here (probed once per process)."""
    global _probe_result, _probe_errno
    if _probe_result is None:
        with _probe_lock:
            if _probe_result is None:
                _probe_result, _probe_errno = _probe()
    return _probe_result


def openat2_probe_errno() -> int | None:
    """The errno that made the probe fail (``None`` if openat2 works), for diagnostics."""
    openat2_available()
    return _probe_errno
