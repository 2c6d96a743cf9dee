"""Layer 2's directory handle: the open workspace directory a Root resolves from.

Private to the package. :class:`~sandbox.root.Root` is the public face and states the
contract; this is what its helpers (:mod:`sandbox._resolve`, :mod:`sandbox._mutate`,
:mod:`sandbox._leftovers`) need of it: the ``O_PATH`` descriptor, the directory's
(st_dev, st_ino) (the walk resolver compares st_dev at every step), which resolver, the count
of operations in flight and the writers' sweep times. Taking this handle, not the Root, they
import nothing of ``root.py``, as Go's internal functions take the root's descriptor.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Literal

from sandbox import _linux
from sandbox._errno import raise_typed
from sandbox.errors import NotADirectory, NotFound, StorageError

__all__ = ["RESOLVER_ENV", "Handle", "Resolver"]

Resolver = Literal["openat2", "walk"]

# Setting this to "walk" forces the fallback resolver everywhere (tests run the whole suite
# both ways so the fallback never rots); "openat2" insists on openat2 and fails if missing.
RESOLVER_ENV = "FSNOTES_RESOLVER"


class Handle:
    """One open directory and its life cycle: safe to share between threads; :meth:`close`
    releases the descriptor once the operations in flight (:meth:`enter` ... :meth:`leave`)
    have finished."""

    __slots__ = ("active", "closed", "dev", "fd", "ino", "lock", "resolver", "swept")

    def __init__(self, fd: int, st: os.stat_result, resolver: Resolver) -> None:
        self.fd = fd
        self.dev = st.st_dev
        self.ino = st.st_ino
        self.resolver: Resolver = resolver
        self.lock = threading.Lock()
        self.active = 0
        self.closed = False
        # (st_dev, st_ino) of a directory -> time.monotonic() of its last sweep by a write.
        self.swept: dict[tuple[int, int], float] = {}

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], resolver: Literal["auto", "openat2", "walk"]
    ) -> Handle:
        """The directory at ``path`` (see :meth:`Root.open <sandbox.root.Root.open>`)."""
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
        return cls(fd, st, resolver)

    def enter(self) -> None:
        # Reference counting instead of a bare fd: closing the descriptor while another thread
        # resolves below it could let the number be reused for an unrelated directory.
        with self.lock:
            if self.closed:
                raise ValueError("operation on a closed Root")
            self.active += 1

    def leave(self) -> None:
        with self.lock:
            self.active -= 1
            if self.closed and self.active == 0:
                os.close(self.fd)
                self.fd = -1

    def fileno(self) -> int:
        with self.lock:
            if self.closed:
                raise ValueError("operation on a closed Root")
            return self.fd

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if self.active == 0:
                os.close(self.fd)
                self.fd = -1
