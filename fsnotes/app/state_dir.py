"""The state directory at start-up: made (or tightened) for the user fsnotes runs as, and,
when it belongs to another user, an error that says which uid runs, who owns it and the fix
(the commonest first-hour failure with Docker, docs/docker.md)."""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

from fsnotes.app.config import Config, ConfigError
from fsnotes.state import statedir


def prepare_state_dir(config: Config) -> None:
    """Create (or tighten) the state directory; a ConfigError that says why not, and when
    it belongs to another user, which uid runs, who owns it and the fix."""
    path = config.state_dir
    try:
        statedir.prepare_dir(path)
    except OSError as exc:
        message = f"cannot use the state directory {path}: {exc.strerror}"
        if exc.errno in (errno.EPERM, errno.EACCES):
            message += ownership_advice(path)
        raise ConfigError(message) from None


def ownership_advice(path: Path) -> str:
    """Which uid runs, who owns ``path`` (or its nearest existing parent, when it is missing)
    and how to make it this user's. Docker creates a missing ``-v`` source folder owned by
    root, which a ``--user`` container then cannot use: the commonest case."""
    uid, gid = os.getuid(), os.getgid()
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        st = existing.stat()
    except OSError:
        return f" (fsnotes runs as uid {uid})"
    where = str(path) if existing == path else f"its nearest existing parent {existing}"
    return (
        f". fsnotes runs as uid {uid} (gid {gid}), and {where} is owned by "
        f"{_owner(st.st_uid)}, mode {stat.S_IMODE(st.st_mode):04o}. The state directory "
        "must belong to the user fsnotes runs as: create it as that user before the first "
        "start (for Docker, `mkdir -p` the host folder before `docker run -v` mounts it: "
        "Docker creates a missing one owned by root), or give it to that user on the host: "
        f"sudo chown -R {uid}:{gid} HOST_FOLDER"
    )


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"
