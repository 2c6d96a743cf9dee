"""Raw Landlock and prctl calls via ctypes: constants, structs, three syscalls.

Nothing here decides policy; :mod:`sandbox.jail` does. Values come from the kernel's
``include/uapi/linux/landlock.h`` and ``Documentation/userspace-api/landlock.rst``.
Linux only; callers check ``sys.platform`` first.
"""

from __future__ import annotations

import ctypes
import os
from typing import Final

# Syscall numbers. Landlock arrived in 5.13, after the 5.1 unification of syscall
# numbers, so 444-446 hold on x86_64, aarch64, arm, riscv, i386, ... alike.
SYS_LANDLOCK_CREATE_RULESET: Final = 444
SYS_LANDLOCK_ADD_RULE: Final = 445
SYS_LANDLOCK_RESTRICT_SELF: Final = 446

PR_SET_NO_NEW_PRIVS: Final = 38

# landlock_create_ruleset() flags
CREATE_RULESET_VERSION: Final = 1 << 0

# landlock_add_rule() rule types
RULE_PATH_BENEATH: Final = 1
RULE_NET_PORT: Final = 2

# landlock_restrict_self() flags
RESTRICT_SELF_TSYNC: Final = 1 << 3  # ABI 8: apply to every thread of the process

# Filesystem rights, with the ABI that introduced each (name, bit, abi).
FS_RIGHTS: Final[tuple[tuple[str, int, int], ...]] = (
    ("execute", 1 << 0, 1),
    ("write_file", 1 << 1, 1),
    ("read_file", 1 << 2, 1),
    ("read_dir", 1 << 3, 1),
    ("remove_dir", 1 << 4, 1),
    ("remove_file", 1 << 5, 1),
    ("make_char", 1 << 6, 1),
    ("make_dir", 1 << 7, 1),
    ("make_reg", 1 << 8, 1),
    ("make_sock", 1 << 9, 1),
    ("make_fifo", 1 << 10, 1),
    ("make_block", 1 << 11, 1),
    ("make_sym", 1 << 12, 1),
    ("refer", 1 << 13, 2),
    ("truncate", 1 << 14, 3),
    ("ioctl_dev", 1 << 15, 5),
    ("resolve_unix", 1 << 16, 9),
)
FS: Final[dict[str, int]] = {name: bit for name, bit, _ in FS_RIGHTS}

# Rights that make sense on a non-directory; the kernel rejects (EINVAL) a path-beneath
# rule on a file that grants any directory-only right.
FS_FILE_RIGHTS: Final = (
    FS["execute"] | FS["write_file"] | FS["read_file"] | FS["truncate"] | FS["ioctl_dev"]
)

NET_RIGHTS: Final[tuple[tuple[str, int, int], ...]] = (
    ("bind_tcp", 1 << 0, 4),
    ("connect_tcp", 1 << 1, 4),
)
NET: Final[dict[str, int]] = {name: bit for name, bit, _ in NET_RIGHTS}

SCOPES: Final[tuple[tuple[str, int, int], ...]] = (
    ("abstract_unix_socket", 1 << 0, 6),
    ("signal", 1 << 1, 6),
)
SCOPE: Final[dict[str, int]] = {name: bit for name, bit, _ in SCOPES}


def known_mask(table: tuple[tuple[str, int, int], ...], abi: int) -> int:
    """The bits of ``table`` that a kernel with Landlock ABI ``abi`` understands."""
    mask = 0
    for _, bit, since in table:
        if since <= abi:
            mask |= bit
    return mask


def names(table: tuple[tuple[str, int, int], ...], mask: int) -> list[str]:
    """The names of the bits set in ``mask``, in the table's order."""
    return [name for name, bit, _ in table if mask & bit]


class RulesetAttr(ctypes.Structure):
    """``struct landlock_ruleset_attr``; pass a prefix of it sized for the ABI."""

    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


def ruleset_attr_size(abi: int) -> int:
    """Bytes of :class:`RulesetAttr` a kernel of this ABI accepts (E2BIG beyond that)."""
    if abi >= 6:
        return 24
    if abi >= 4:
        return 16
    return 8


class PathBeneathAttr(ctypes.Structure):
    """``struct landlock_path_beneath_attr``: packed in the UAPI, hence 12 bytes."""

    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class NetPortAttr(ctypes.Structure):
    """``struct landlock_net_port_attr`` (ABI 4)."""

    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """Landlock ABI of the running kernel; raises :class:`OSError` with the kernel's errno.

    ENOSYS: no Landlock in this kernel (or a seccomp stub); EOPNOTSUPP: built in but not
    enabled in ``lsm=``; EPERM: a seccomp profile denies the syscall.
    """
    # Integer arguments go through ``syscall()``'s varargs as full longs.
    return _check(
        _libc.syscall(
            ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET),
            ctypes.c_void_p(None),
            ctypes.c_long(0),
            ctypes.c_long(CREATE_RULESET_VERSION),
        ),
        "landlock_create_ruleset(VERSION)",
    )


def create_ruleset(attr: RulesetAttr, size: int) -> int:
    """A new ruleset fd (close-on-exec)."""
    return _check(
        _libc.syscall(
            ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET),
            ctypes.byref(attr),
            ctypes.c_long(size),
            ctypes.c_long(0),
        ),
        "landlock_create_ruleset",
    )


def add_path_rule(ruleset_fd: int, allowed: int, parent_fd: int) -> None:
    """Allow ``allowed`` beneath the file or directory open as ``parent_fd``."""
    attr = PathBeneathAttr(allowed_access=allowed, parent_fd=parent_fd)
    _check(
        _libc.syscall(
            ctypes.c_long(SYS_LANDLOCK_ADD_RULE),
            ctypes.c_long(ruleset_fd),
            ctypes.c_long(RULE_PATH_BENEATH),
            ctypes.byref(attr),
            ctypes.c_long(0),
        ),
        "landlock_add_rule(PATH_BENEATH)",
    )


def add_port_rule(ruleset_fd: int, allowed: int, port: int) -> None:
    """Allow the ``allowed`` TCP rights on ``port``."""
    attr = NetPortAttr(allowed_access=allowed, port=port)
    _check(
        _libc.syscall(
            ctypes.c_long(SYS_LANDLOCK_ADD_RULE),
            ctypes.c_long(ruleset_fd),
            ctypes.c_long(RULE_NET_PORT),
            ctypes.byref(attr),
            ctypes.c_long(0),
        ),
        "landlock_add_rule(NET_PORT)",
    )


def restrict_self(ruleset_fd: int, flags: int) -> None:
    """Enforce the ruleset on the calling thread (and, with TSYNC, all threads)."""
    _check(
        _libc.syscall(
            ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF),
            ctypes.c_long(ruleset_fd),
            ctypes.c_long(flags),
        ),
        "landlock_restrict_self",
    )


def set_no_new_privs() -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``: required before an unprivileged restrict_self."""
    prctl = _libc.prctl  # looked up here: glibc and musl have it, other libcs do not
    prctl.restype = ctypes.c_int
    _check(
        prctl(
            ctypes.c_int(PR_SET_NO_NEW_PRIVS),
            ctypes.c_ulong(1),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        ),
        "prctl(PR_SET_NO_NEW_PRIVS)",
    )
