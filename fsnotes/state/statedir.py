"""The state directory's own files: private, never reached through a link, set up one process
at a time.

Everything fsnotes keeps there (sealing keys, the databases and SQLite's ``-wal``/``-shm``/
``-journal`` beside them, the setup code, the lock files, the search indexes) is mode 0600 in
a 0700 directory, whatever the process umask. SQLite gives its side files the mode of the
database file, so a database file created 0600 before SQLite opens it keeps its side files
0600 too; files left looser by an older version are tightened when found.

The rule: workspace files are reached only through :class:`sandbox.root.Root`; the state
directory's files only through this module, which holds every raw open, write, link and
rename of them (the keyring and the setup code call :func:`read_file`, :func:`write_temp`
and :func:`publish`). Two things reach state files by name elsewhere, on purpose: SQLite
opens its databases by path (it has no descriptor interface), after :func:`prepare_database`
made them private; and the search index (``fsnotes/notes/index/noteindex.py``) unlinks an unusable
index file and its side files by name before rebuilding it (``unlink`` follows no link).
The state directory is not a ``Root``: its files need exact modes, ``flock`` and
first-writer-wins links, which ``Root`` (made for notes) does not offer, and Landlock already
confines the process to it. ``tests/state/test_statedir.py`` reads the source for raw file
calls anywhere else in ``fsnotes/``.

Every open uses ``O_NOFOLLOW`` (a symbolic link planted in place of a state file is refused,
never followed) and ``O_NONBLOCK`` (a FIFO planted there is refused, never waited on).

Guarantees and limits:

- :func:`private_file` leaves a regular, non-link file of mode 0600 at the path, or raises.
  SQLite then opens the file by name (it has no descriptor interface); in a 0700 directory
  only the serving user (or root) could swap it in between.
- :func:`setup_lock` serialises database creation and migration between the processes
  sharing the directory (an exclusive ``flock`` on ``state.lock``). It does not serialise
  anything else: the databases' own locks do that.
- :func:`write_temp` then :func:`publish` give a small file (the keyring, the setup code) its
  name atomically: readers see the old content or the new, never part of one. The
  directory is not synced after: a crash right then may lose the new name (the next start
  makes a new setup code, or a new keyring, and only confirmations still being asked for
  need asking again).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

STATE_DIR_MODE = 0o700  # keys, grants and confirmations: the serving user only
STATE_FILE_MODE = 0o600
LOCK_NAME = "state.lock"
# SQLite's files beside a database ("-journal" only outside WAL mode).
SQLITE_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")
# How often a process waiting for the set-up lock tries again. Creating a schema takes
# milliseconds, so a short poll keeps simultaneous starts quick.
LOCK_POLL_S = 0.005

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO
# Random part of a temp file's name: two writers (processes or threads) never collide.
TEMP_TOKEN_BYTES = 8


class StateFileError(Exception):
    """A state file cannot be made private (a link, not a regular file, or an OS error)."""


class SetupLockTimeout(Exception):
    """Another process held the set-up lock past the timeout."""


def prepare_dir(path: Path) -> None:
    """Create the state directory 0700 if missing; an existing looser one is tightened
    rather than trusted. Raises OSError."""
    path.mkdir(mode=STATE_DIR_MODE, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) != STATE_DIR_MODE:
        os.chmod(path, STATE_DIR_MODE)


def _explain(path: Path, exc: OSError) -> StateFileError:
    if exc.errno == errno.ELOOP:
        return StateFileError(f"{path.name} is a symbolic link; fsnotes never follows one there")
    return StateFileError(f"cannot use {path.name}: {exc.strerror}")


def _make_private(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise StateFileError(f"{path.name} is not a regular file")
    if stat.S_IMODE(st.st_mode) != STATE_FILE_MODE:
        os.fchmod(fd, STATE_FILE_MODE)  # umask applied at creation, or an older version


def _open_private(path: Path, flags: int) -> int:
    """A descriptor on ``path`` (created 0600 with ``O_CREAT`` in ``flags``) made private."""
    try:
        fd = os.open(path, flags | _OPEN_FLAGS, STATE_FILE_MODE)
    except OSError as exc:
        raise _explain(path, exc) from None
    try:
        _make_private(fd, path)
    except OSError as exc:
        os.close(fd)
        raise _explain(path, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def private_file(path: Path) -> None:
    """Make ``path`` a private regular file: created empty 0600 if missing, tightened if
    looser. Raises StateFileError for a link, a non-regular file or an OS error."""
    os.close(_open_private(path, os.O_RDWR | os.O_CREAT))


def tighten_if_present(path: Path) -> None:
    """Like :func:`private_file`, for a file that may not exist (which is left missing)."""
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _explain(path, exc) from None
    try:
        _make_private(fd, path)
    except OSError as exc:
        raise _explain(path, exc) from None
    finally:
        os.close(fd)


def read_file(path: Path, *, max_bytes: int) -> tuple[bytes, int]:
    """The content of the state file ``path`` and its permission bits, read from one
    descriptor opened without following a link or waiting on a FIFO.

    Raises FileNotFoundError when it is missing, and StateFileError when it is a link, not a
    regular file, larger than ``max_bytes``, or unreadable.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _explain(path, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError(f"{path.name} is not a regular file")
        chunks = []
        left = max_bytes + 1  # one byte more than allowed tells "too large" from "exactly"
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _explain(path, exc) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise StateFileError(f"{path.name} is larger than {max_bytes} bytes")
    return data, stat.S_IMODE(st.st_mode)


def version_of(path: Path) -> tuple[int, int, int, int] | None:
    """What tells one content of the state file ``path`` from the next (device, inode, size,
    change time), from ``lstat`` (a link is not followed); ``None`` when it is missing. A file
    replaced by :func:`publish` always gets a new inode, so a reader that keeps this can tell
    cheaply whether to read the file again."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)


def write_temp(state_dir: Path, name: str, data: bytes) -> Path:
    """A new private file beside ``name`` in ``state_dir`` (``.<name>.<random>.tmp``, 0600
    whatever the umask, created exclusively: never an existing file, never through a link)
    holding ``data``, synced to disk. Removed again when anything fails; raises OSError."""
    tmp = state_dir / f".{name}.{secrets.token_hex(TEMP_TOKEN_BYTES)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, STATE_FILE_MODE)
    try:
        try:
            os.fchmod(fd, STATE_FILE_MODE)  # the umask applied at creation
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def publish(tmp: Path, path: Path, *, replace: bool) -> bool:
    """Give the temp file ``tmp`` (from :func:`write_temp`) the name ``path``, atomically.

    ``replace``: rename over whatever is there (a link there is replaced, not followed).
    Otherwise the name is taken only if free (``link``, which never replaces: the first
    writer wins, and another's file there is kept). Returns whether ``tmp``'s content now
    has the name. ``tmp`` is gone afterwards in every case; raises OSError.
    """
    if replace:
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return True
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def prepare_database(path: Path) -> None:
    """The database file and any side files SQLite left, private before SQLite opens them."""
    private_file(path)
    for suffix in SQLITE_SIDE_SUFFIXES:
        tighten_if_present(path.with_name(path.name + suffix))


@contextlib.contextmanager
def setup_lock(state_dir: Path, *, timeout: float) -> Iterator[None]:
    """Hold the state directory's set-up lock for the block.

    Raises SetupLockTimeout when another process holds it for more than ``timeout`` seconds
    (a hung or stopped process: start-up then fails with a reason instead of hanging), and
    StateFileError when the lock file cannot be used. The lock is released when the block
    ends or the process dies.
    """
    with exclusive(
        state_dir / LOCK_NAME,
        timeout=timeout,
        held_by_other="another fsnotes process has been setting up the state directory",
    ):
        yield


@contextlib.contextmanager
def exclusive(path: Path, *, timeout: float, held_by_other: str) -> Iterator[None]:
    """Hold ``flock(LOCK_EX)`` on the private lock file ``path`` for the block, waiting at
    most ``timeout`` seconds (SetupLockTimeout, whose message starts with ``held_by_other``)."""
    fd = _open_private(path, os.O_RDWR | os.O_CREAT)
    try:
        deadline = time.monotonic() + timeout
        while not _try_flock(fd, path, fcntl.LOCK_EX):
            if time.monotonic() >= deadline:
                raise SetupLockTimeout(f"{held_by_other} for more than {timeout:g} s")
            time.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the flock


@contextlib.contextmanager
def exclusive_or_none(path: Path) -> Iterator[bool]:
    """Try once to hold ``flock(LOCK_EX)`` on the private lock file ``path``: the block gets
    True while holding it, False when another process does."""
    fd = _open_private(path, os.O_RDWR | os.O_CREAT)
    try:
        yield _try_flock(fd, path, fcntl.LOCK_EX)
    finally:
        os.close(fd)


def held_elsewhere(path: Path) -> bool:
    """Whether another process holds the lock file ``path`` (missing: nobody does)."""
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    except OSError:
        return False
    try:
        return not _try_flock(fd, path, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def _try_flock(fd: int, path: Path, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:  # a filesystem without flock (ENOLCK, EOPNOTSUPP)
        raise StateFileError(f"cannot lock {path.name}: {exc.strerror}") from None
    return True
