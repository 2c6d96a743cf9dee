"""Layer 3: the process restricts itself with Landlock.

Once :func:`apply_landlock` returns with ``applied=True``, the kernel itself refuses this
process any file access outside the rules below, even if layers 1 and 2 have a bug:

* workspaces and state directories: read, write, create regular files and directories,
  remove, rename (also across directories: ``refer``), truncate, list;
* the Python runtime (:func:`runtime_read_only_paths`): read and list only;
* everything else: nothing. In particular no symlink creation anywhere, no execution of
  any program, no device, FIFO or socket nodes, no TCP connect and no TCP bind except the
  ports given, no connecting to abstract Unix sockets or signalling processes outside the
  domain.

Guarantees and limits, honestly:

* Best effort per ABI: the kernel's Landlock ABI decides what can be restricted; rights it
  does not know are reported in :attr:`JailReport.not_applied`, or in
  :attr:`JailReport.not_yet` when no released kernel knows them either (pathname Unix
  socket connects are only handled from ABI 9, Linux 7.1). Without Landlock (kernel
  < 5.13, disabled in ``lsm=``, or a seccomp profile that blocks it) nothing is
  restricted and the report says why; the process is not stopped: the caller decides.
* Landlock binds the calling thread and the threads and children it creates *later*. A
  thread already running keeps its freedom, so :func:`apply_landlock` refuses to run when
  the process has more than one thread. Call it at start-up after opening the workspaces
  and the state directory, and before starting an event loop's worker threads.
* Landlock does not mediate ``stat``, ``chmod``, ``chown``, ``utime``, ``readlink`` or
  ``chdir`` on paths outside the rules, nor descriptors opened before the call; run as a
  non-root user without capabilities so those stay harmless.
* ``PR_SET_NO_NEW_PRIVS`` is set first, always (also when Landlock is missing): no
  set-uid program can regain privileges afterwards.

Applying is explicit: nothing happens on import; an opt-out is the caller's business.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sandbox.errors import SandboxError

__all__ = [
    "JailError",
    "JailReport",
    "applied_report",
    "apply_landlock",
    "landlock_abi",
    "landlock_status",
    "runtime_read_only_paths",
]

# Kernel versions per ABI, for messages people can act on.
_ABI_KERNEL = {1: "5.13", 2: "5.19", 3: "6.2", 4: "6.7", 5: "6.10", 6: "6.12", 8: "7.0", 9: "7.1"}
# The newest Landlock ABI of a released kernel (8: Linux 7.0). A gap that only a newer ABI
# closes needs a kernel nobody can install yet, so nothing a user can act on: it is reported
# apart (JailReport.not_yet, `fsnotes doctor`), not warned about at every start. Raise this
# when Linux 7.1 (ABI 9) is released.
NEWEST_RELEASED_ABI = 8

# Read-only system paths the runtime may still need after the jail is up, and why:
#   /usr             Debian's python3 stdlib, and the shared libraries C extensions load
#                    lazily (libssl, libsqlite3, libffi, libz, ...), zoneinfo.
#   /lib /lib64 /lib32
#                    libc and the dynamic loader on systems without merged /usr (on
#                    merged-/usr systems they are links into /usr: a duplicate rule).
#   /etc/ld.so.cache dlopen() of a library by soname looks it up here.
# Deliberately absent: the rest of /etc (passwd, shadow, hosts, ...); /etc/ssl (the server
# makes no TLS connections, and TCP connect is denied anyway); /proc, /sys, /dev, /tmp,
# the home directory.
_SYSTEM_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache")


class JailError(SandboxError):
    """The jail could not be set up as asked; the process is *not* restricted.

    ``detail`` names the offending host path for the operator's log (the message itself
    names none, as for every :class:`SandboxError`).
    """

    def __init__(self, message: str, *, errno: int | None = None, detail: str = "") -> None:
        super().__init__(message, errno=errno)
        self.detail = detail


@dataclass(frozen=True)
class JailReport:
    """What :func:`apply_landlock` did.

    ``abi`` is the kernel's Landlock ABI (``None``: unavailable); ``applied`` says whether
    the process is now restricted; ``handled_fs`` / ``handled_net`` / ``scoped`` name the
    rights the kernel now mediates (anything handled and not granted by a rule is
    denied); ``not_applied`` lists, in plain words, what the kernel could not restrict and
    why, where a released kernel could; ``not_yet`` what only a kernel newer than any
    released one (above :data:`NEWEST_RELEASED_ABI`) could restrict.
    """

    abi: int | None
    applied: bool
    handled_fs: list[str] = field(default_factory=list)
    handled_net: list[str] = field(default_factory=list)
    scoped: list[str] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)
    not_yet: list[str] = field(default_factory=list)


_applied: JailReport | None = None


def applied_report() -> JailReport | None:
    """The report of the last successful :func:`apply_landlock` in this process, if any."""
    return _applied


def landlock_status() -> tuple[int | None, str]:
    """``(abi, "")`` when Landlock is usable, else ``(None, why not in plain words)``."""
    if sys.platform != "linux":
        return None, f"Landlock is Linux-only (this is {sys.platform})"
    from sandbox import _landlock

    try:
        return _landlock.abi_version(), ""
    except OSError as exc:
        reasons = {
            errno.ENOSYS: "this kernel has no Landlock (needs Linux 5.13+), or a seccomp "
            "filter hides it",
            errno.EOPNOTSUPP: "Landlock is built into this kernel but disabled (lsm= boot "
            "parameter)",
            errno.EPERM: "a seccomp filter denies the Landlock system calls (old container "
            "runtime profile?)",
        }
        return None, reasons.get(exc.errno or 0, f"the Landlock probe failed: {exc.strerror}")


def landlock_abi() -> int | None:
    """The running kernel's Landlock ABI version, or ``None`` when unsupported/disabled."""
    return landlock_status()[0]


def runtime_read_only_paths() -> list[str]:
    """Paths the Python runtime reads after start-up, existing ones only, no duplicates.

    ``sys.prefix``, ``sys.base_prefix``, ``sys.exec_prefix``, ``sys.base_exec_prefix``,
    every absolute ``sys.path`` entry (stdlib, site-packages, an editable checkout), and
    the system paths in ``_SYSTEM_READ_ONLY`` (``/usr``, ``/lib*``, ``/etc/ld.so.cache``).
    Also the directory of every top-level package already imported from outside those
    paths: an editable install maps ``fsnotes`` and ``sandbox`` to a checkout through an
    import hook, not through ``sys.path``, and their submodules still import lazily.
    ``/`` is never included even if it is on ``sys.path``: it would void the jail. Note
    that ``python -m`` puts the current directory on ``sys.path``; start the server via
    its console script or from a narrow directory.
    """
    candidates = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        *sys.path,
        *_SYSTEM_READ_ONLY,
    ]
    paths: list[str] = []
    for entry in candidates:
        if not entry or not os.path.isabs(entry):
            continue
        path = os.path.normpath(entry)
        if path != "/" and path not in paths and os.path.exists(path):
            paths.append(path)

    def covered(path: str) -> bool:
        return any(path == p or path.startswith(p.rstrip("/") + "/") for p in paths)

    for name, module in list(sys.modules.items()):
        if "." in name or name == "__main__":
            continue
        locations = list(getattr(module, "__path__", None) or ())
        if not locations and isinstance(getattr(module, "__file__", None), str):
            locations = [module.__file__]
        for location in locations:
            if isinstance(location, str) and os.path.isabs(location):
                path = os.path.normpath(location)
                if path != "/" and not covered(path) and os.path.exists(path):
                    paths.append(path)
    return paths


def _thread_count() -> int:
    """Threads of this process as the kernel sees them (C threads included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _check_single_threaded() -> None:
    python_threads = threading.active_count()
    kernel_threads = _thread_count()
    if python_threads != 1 or kernel_threads != 1:
        raise JailError(
            f"Landlock must be applied while the process has one thread, but it has "
            f"{max(python_threads, kernel_threads)}: threads already running would stay "
            f"unrestricted. Apply the jail before starting the event loop or any worker.",
        )


def _open_rule_target(target: int | str, *, role: str, index: int, need_dir: bool) -> int:
    """An ``O_PATH`` fd for a rule target (a dup when given an fd: we close ours only)."""
    try:
        if isinstance(target, int):
            fd = os.dup(target)
        else:
            fd = os.open(target, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise JailError(
            f"cannot open {role} #{index + 1} for the jail: {exc.strerror}",
            errno=exc.errno,
            detail=str(target),
        ) from None
    if need_dir and not stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise JailError(f"{role} #{index + 1} is not a directory", detail=str(target))
    return fd


def abi_gaps(abi: int) -> tuple[list[str], list[str]]:
    """Plain-words notes on what this ABI cannot restrict: ``(not_applied, not_yet)``, the
    gaps a released kernel closes and those only an unreleased one would (see
    :data:`NEWEST_RELEASED_ABI`)."""

    def since(n: int) -> str:
        return f"needs Landlock ABI {n} (Linux {_ABI_KERNEL[n]}), this kernel has ABI {abi}"

    gaps: list[tuple[int, str]] = [
        (2, f"refer: {since(2)}; moving files between directories fails (EXDEV)"),
        (3, f"truncate: {since(3)}; truncating files is not restricted"),
        (4, f"tcp bind/connect: {since(4)}; TCP is not restricted"),
        (5, f"ioctl on devices: {since(5)}; not restricted"),
        (6, f"scopes: {since(6)}; abstract Unix sockets and signals are not restricted"),
        # ABI < 8 lacks TSYNC (restrict every thread at once); not a gap, since
        # apply_landlock refuses to run with more than one thread.
        (
            9,
            f"connect to pathname Unix sockets: {since(9)}; not restricted (UDP, raw "
            "and other socket families are never restricted by Landlock)",
        ),
    ]
    missing = [(needed, text) for needed, text in gaps if abi < needed]
    return (
        [text for needed, text in missing if needed <= NEWEST_RELEASED_ABI],
        [text for needed, text in missing if needed > NEWEST_RELEASED_ABI],
    )


def apply_landlock(
    *,
    writable: Sequence[int | str],
    read_only: Sequence[int | str],
    state_dirs: Sequence[int | str] = (),
    allow_bind_tcp: Sequence[int] = (),
    allow_connect_tcp: Sequence[int] = (),
) -> JailReport:
    """Restrict this process (and everything it starts later) with Landlock.

    ``writable`` (workspaces) and ``state_dirs``: directory fds (``O_PATH`` is enough;
    they are not closed) or paths; they get read, write, create (regular files and
    directories), remove, rename/refer, truncate and list. ``read_only``: files or
    directories (paths or fds) that get read and list (usually
    :func:`runtime_read_only_paths`); missing ones are skipped and noted in the report.
    ``allow_bind_tcp``: TCP ports the process may still bind (ABI 4+).
    ``allow_connect_tcp``: TCP ports it may still connect to (ABI 4+; Landlock rules name a
    port, not an address, so any host's port). Every other TCP connect is denied.

    Raises :class:`JailError` (nothing applied) when called with more than one thread,
    when a workspace or state directory cannot be opened or is not a directory, or when
    the kernel rejects the ruleset. Returns a :class:`JailReport`; ``applied=False`` with
    the reason in ``not_applied`` when this kernel has no usable Landlock.
    """
    global _applied
    from sandbox import _landlock as ll

    for port in (*allow_bind_tcp, *allow_connect_tcp):
        if not 0 <= port <= 65535:
            raise JailError(f"TCP port {port} is out of range 0-65535")
    _check_single_threaded()

    fds: list[tuple[int, bool]] = []  # (fd, is_writable)
    try:
        for role, targets in (("workspace", writable), ("state directory", state_dirs)):
            for i, target in enumerate(targets):
                fds.append((_open_rule_target(target, role=role, index=i, need_dir=True), True))
        skipped: list[str] = []
        for i, path in enumerate(read_only):
            try:
                fds.append(
                    (_open_rule_target(path, role="read-only path", index=i, need_dir=False), False)
                )
            except JailError as exc:
                if exc.errno != errno.ENOENT:
                    raise
                skipped.append(f"read-only path skipped, it does not exist: {path}")

        if sys.platform == "linux":
            try:
                ll.set_no_new_privs()
            except OSError as exc:
                raise JailError(
                    f"cannot set no_new_privs: {exc.strerror}", errno=exc.errno
                ) from None

        abi, reason = landlock_status()
        if abi is None:
            return JailReport(
                abi=None, applied=False, not_applied=[f"landlock: not applied: {reason}", *skipped]
            )

        handled_fs = ll.known_mask(ll.FS_RIGHTS, abi)
        handled_net = ll.known_mask(ll.NET_RIGHTS, abi)
        scoped = ll.known_mask(ll.SCOPES, abi)
        if (allow_bind_tcp or allow_connect_tcp) and not handled_net:
            skipped.append("tcp ports: binding and connecting are not restricted on this ABI")

        read_write = handled_fs & (
            ll.FS["read_file"]
            | ll.FS["write_file"]
            | ll.FS["read_dir"]
            | ll.FS["remove_dir"]
            | ll.FS["remove_file"]
            | ll.FS["make_dir"]
            | ll.FS["make_reg"]
            | ll.FS["refer"]
            | ll.FS["truncate"]
        )
        read = handled_fs & (ll.FS["read_file"] | ll.FS["read_dir"])

        attr = ll.RulesetAttr(
            handled_access_fs=handled_fs, handled_access_net=handled_net, scoped=scoped
        )
        try:
            ruleset = ll.create_ruleset(attr, ll.ruleset_attr_size(abi))
        except OSError as exc:
            raise JailError(
                f"the kernel rejected the Landlock ruleset: {exc.strerror}", errno=exc.errno
            ) from None
        try:
            for fd, is_writable in fds:
                allowed = read_write if is_writable else read
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    allowed &= ll.FS_FILE_RIGHTS
                ll.add_path_rule(ruleset, allowed, fd)
            for port in sorted(set(allow_bind_tcp)) if handled_net else ():
                ll.add_port_rule(ruleset, ll.NET["bind_tcp"], port)
            for port in sorted(set(allow_connect_tcp)) if handled_net else ():
                ll.add_port_rule(ruleset, ll.NET["connect_tcp"], port)
            ll.restrict_self(ruleset, ll.RESTRICT_SELF_TSYNC if abi >= 8 else 0)
        except OSError as exc:
            raise JailError(
                f"Landlock refused a rule or the restriction: {exc.strerror}", errno=exc.errno
            ) from None
        finally:
            os.close(ruleset)
    finally:
        for fd, _ in fds:
            os.close(fd)

    released_gaps, unreleased_gaps = abi_gaps(abi)
    report = JailReport(
        abi=abi,
        applied=True,
        handled_fs=ll.names(ll.FS_RIGHTS, handled_fs),
        handled_net=ll.names(ll.NET_RIGHTS, handled_net),
        scoped=ll.names(ll.SCOPES, scoped),
        not_applied=[*released_gaps, *skipped],
        not_yet=unreleased_gaps,
    )
    _applied = report
    return report
