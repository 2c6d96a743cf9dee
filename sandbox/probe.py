"""What this kernel and runtime offer the sandbox, for ``fsnotes doctor``.

Every probe is read-only and cheap (a few syscalls, one short-lived child process for the
user-namespace test) and never raises: a fact it cannot learn is ``None`` with the reason
in the matching ``*_detail`` field. Probing works inside the jail too, with less to see
(``/proc/self/status`` is not readable under Landlock).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import time
from dataclasses import dataclass

from sandbox import jail

__all__ = ["Facts", "capability_names", "probe"]

# Index = capability number (include/uapi/linux/capability.h).
_CAPABILITIES = (
    "chown",
    "dac_override",
    "dac_read_search",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "linux_immutable",
    "net_bind_service",
    "net_broadcast",
    "net_admin",
    "net_raw",
    "ipc_lock",
    "ipc_owner",
    "sys_module",
    "sys_rawio",
    "sys_chroot",
    "sys_ptrace",
    "sys_pacct",
    "sys_admin",
    "sys_boot",
    "sys_nice",
    "sys_resource",
    "sys_time",
    "sys_tty_config",
    "mknod",
    "lease",
    "audit_write",
    "audit_control",
    "setfcap",
    "mac_override",
    "mac_admin",
    "syslog",
    "wake_alarm",
    "block_suspend",
    "audit_read",
    "perfmon",
    "bpf",
    "checkpoint_restore",
)

_CLONE_NEWUSER = 0x10000000
# The user-namespace child only calls unshare() and exits; if it is not reaped within this
# time something is badly wrong (e.g. fork from a threaded process deadlocked): kill it.
_USERNS_CHILD_TIMEOUT_S = 5.0
_USERNS_POLL_S = 0.01

# Markers in /proc/1/cgroup (cgroup v1 paths; v2 shows only "0::/") and what they mean.
_CGROUP_MARKERS = (
    ("kubepods", "kubernetes"),
    ("docker", "docker"),
    ("libpod", "podman"),
    ("containerd", "containerd"),
    ("lxc", "lxc"),
)

_SECCOMP_MODES = {0: "disabled", 1: "strict", 2: "filter"}


@dataclass(frozen=True)
class Facts:
    """One snapshot of what the sandbox can use here; see the module docstring."""

    platform: str
    openat2: bool | None
    openat2_detail: str
    landlock_abi: int | None
    landlock_detail: str
    landlocked: bool | None
    landlocked_detail: str
    no_new_privs: bool | None
    seccomp: str | None  # "disabled", "strict" or "filter"
    seccomp_filters: int | None
    user_namespaces: bool | None
    user_namespaces_detail: str
    container: str | None  # "docker", "podman", "kubernetes", ... or None
    container_detail: str
    uid: int
    euid: int
    capabilities: list[str] | None  # effective set; None if unreadable


def capability_names(mask: int) -> list[str]:
    """Names of the capabilities set in a ``CapEff``-style mask."""
    return [
        _CAPABILITIES[i] if i < len(_CAPABILITIES) else f"cap_{i}"
        for i in range(mask.bit_length())
        if mask >> i & 1
    ]


def _status_fields() -> dict[str, str] | None:
    try:
        with open("/proc/self/status") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def _openat2() -> tuple[bool | None, str]:
    if sys.platform != "linux":
        return False, "openat2 is Linux-only; the component walk is used"
    try:
        from sandbox import _linux
    except ImportError:
        return None, "sandbox._linux is missing: cannot probe openat2"
    if _linux.openat2_available():
        return True, "openat2 with RESOLVE_BENEATH|NO_SYMLINKS|NO_MAGICLINKS|NO_XDEV works"
    code = _linux.openat2_probe_errno()
    name = errno.errorcode.get(code or 0, str(code))
    return False, f"openat2 is not usable here ({name}); the component walk is used"


def _landlocked(fields: dict[str, str] | None) -> tuple[bool | None, str]:
    report = jail.applied_report()
    if report is not None:
        return True, f"applied by this process (ABI {report.abi})"
    # Nothing in /proc names a Landlock domain, so look for its effect: '/' permits
    # listing (DAC) but the kernel refuses it.
    try:
        os.listdir("/")
    except PermissionError:
        if os.access("/", os.R_OK):
            return True, "probably: listing / is refused although its permissions allow it"
        return None, "cannot tell: listing / is refused by its permissions"
    except OSError as exc:
        return None, f"cannot tell: listing / failed ({exc.strerror})"
    if fields is None:
        return None, "cannot tell: /proc/self/status is unreadable"
    return False, "no sign of a Landlock domain (listing / works)"


def _user_namespaces() -> tuple[bool | None, str]:
    if sys.platform != "linux":
        return False, "user namespaces are Linux-only"
    notes = []
    for path, bad, meaning in (
        ("/proc/sys/user/max_user_namespaces", "0", "max_user_namespaces is 0"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0", "unprivileged_userns_clone is 0"),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "AppArmor restricts unprivileged user namespaces (bwrap needs a profile)",
        ),
    ):
        try:
            with open(path) as f:
                if f.read().strip() == bad:
                    notes.append(meaning)
        except OSError:
            pass
    # The real test: can a child of ours create one? (unshare() refuses in a threaded
    # process, hence the child.)
    unshare = ctypes.CDLL(None, use_errno=True).unshare  # resolved before fork
    try:
        pid = os.fork()
    except OSError as exc:
        return None, f"cannot tell: fork failed ({exc.strerror})"
    if pid == 0:  # child: only async-signal-safe work, then _exit
        rc = unshare(ctypes.c_int(_CLONE_NEWUSER))
        os._exit(0 if rc == 0 else min(ctypes.get_errno(), 255) or 255)
    deadline = time.monotonic() + _USERNS_CHILD_TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None, "cannot tell: the probe child hung and was killed"
        time.sleep(_USERNS_POLL_S)
    code = os.waitstatus_to_exitcode(status)
    extra = f" ({'; '.join(notes)})" if notes else ""
    as_root = " as root" if os.geteuid() == 0 else ""
    if code == 0:
        return True, f"a new user namespace can be created{as_root}{extra}"
    name = errno.errorcode.get(code, str(code))
    return False, f"creating a user namespace failed{as_root}: {name}{extra}"


def _container() -> tuple[str | None, str]:
    if os.path.exists("/.dockerenv"):
        return "docker", "/.dockerenv exists"
    if os.path.exists("/run/.containerenv"):
        return "podman", "/run/.containerenv exists"
    # systemd-nspawn, podman and LXC set it, in lower case by convention.
    env = os.environ.get("container")  # noqa: SIM112
    if env:
        return env, f"the 'container' environment variable is {env!r}"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes", "KUBERNETES_SERVICE_HOST is set"
    try:
        with open("/proc/1/cgroup") as f:
            cgroup = f.read()
    except OSError:
        return None, "no container marker found (/proc/1/cgroup unreadable)"
    for marker, kind in _CGROUP_MARKERS:
        if marker in cgroup:
            return kind, f"/proc/1/cgroup mentions {marker}"
    return None, "no container marker found"


def probe() -> Facts:
    """Probe everything once; see :class:`Facts`."""
    fields = _status_fields()
    openat2, openat2_detail = _openat2()
    abi, landlock_detail = jail.landlock_status()
    if abi is not None:
        landlock_detail = f"Landlock ABI {abi}"
    landlocked, landlocked_detail = _landlocked(fields)
    userns, userns_detail = _user_namespaces()
    container, container_detail = _container()

    nnp = seccomp = filters = caps = None
    if fields is not None:
        if "NoNewPrivs" in fields:
            nnp = fields["NoNewPrivs"] == "1"
        if "Seccomp" in fields:
            seccomp = _SECCOMP_MODES.get(int(fields["Seccomp"]), fields["Seccomp"])
        if "Seccomp_filters" in fields:
            filters = int(fields["Seccomp_filters"])
        if "CapEff" in fields:
            caps = capability_names(int(fields["CapEff"], 16))
    return Facts(
        platform=f"{sys.platform} {os.uname().release}",
        openat2=openat2,
        openat2_detail=openat2_detail,
        landlock_abi=abi,
        landlock_detail=landlock_detail,
        landlocked=landlocked,
        landlocked_detail=landlocked_detail,
        no_new_privs=nnp,
        seccomp=seccomp,
        seccomp_filters=filters,
        user_namespaces=userns,
        user_namespaces_detail=userns_detail,
        container=container,
        container_detail=container_detail,
        uid=os.getuid(),
        euid=os.geteuid(),
        capabilities=caps,
    )
