"""The configuration file's ``[[http.token]]`` entries: read at start, and again while serving.

A serving process asks :class:`ConfigTokens` for the entries at every request (through
:class:`~fsnotes.security.tokens.BearerTokens`), so a token removed from the configuration
is refused at the next request, by every instance that reads that file, without a restart.
Only the token entries are re-read; every other setting is the process's from its start.

Guarantees and limits:

- **Cheap.** One ``stat`` of the file per request (a microsecond or two); the file is read
  and parsed again only when its identity (device, inode, size, modification and change
  times) changed. A save by rename (editors, ``mv``) gives a new inode, a rewrite in place a
  new size or modification time.
- **Fails closed.** While the file is missing, unreadable or not valid TOML, or its token
  entries are not valid, *none* of its tokens is accepted (the tokens file's and OAuth's
  still are), with one warning per change of the file. Keeping the last good entries
  instead would keep a revoked token working whenever the edit that removed it also broke
  the file.
- **The jail.** The server's Landlock rules let it read the configuration file's directory
  (a file saved by rename is a new inode, which a rule on the old file would not cover);
  see ``fsnotes/app/server.py``. A configuration bind-mounted into a container as a single
  file keeps showing the old inode after an editor's rename on the host: mount its
  directory instead.
"""

from __future__ import annotations

import logging
import os
import threading
import tomllib
from typing import Any

from fsnotes.security.tokens import TokenEntry, entry_from

_log = logging.getLogger("fsnotes.security")

# A configuration file is a few KiB; a larger one is not read while serving.
MAX_CONFIG_BYTES = 1024 * 1024


def tokens_of_table(table: Any) -> tuple[TokenEntry, ...]:
    """The ``[[http.token]]`` entries of an ``[http]`` table; ValueError saying what is wrong."""
    if not isinstance(table, dict):
        raise ValueError("[http] must be a table")
    raw_tokens = table.get("token", [])
    if not isinstance(raw_tokens, list):
        raise ValueError("[[http.token]] must be an array of tables")
    return tuple(entry_from(raw, f"[[http.token]] #{i + 1}") for i, raw in enumerate(raw_tokens))


def _identity(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)  # follows a link: a configuration may be one (a mounted ConfigMap)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_tokens(path: str) -> tuple[TokenEntry, ...]:
    """The token entries the configuration file holds now; ValueError or OSError if none can
    be known."""
    with open(path, "rb") as f:
        data = f.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"it is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"it is not valid TOML ({exc})") from None
    return tokens_of_table(doc.get("http", {}))


class ConfigTokens:
    """The token entries of the configuration file ``path``, as of now (see the module)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._identity: tuple[int, ...] | None = None
        self._entries: tuple[TokenEntry, ...] = ()
        self.problem: str | None = None
        self._loaded = False
        self()

    def __call__(self) -> tuple[TokenEntry, ...]:
        identity = _identity(self.path)
        if self._loaded and identity == self._identity and identity is not None:
            return self._entries
        with self._lock:
            if not (self._loaded and identity == self._identity and identity is not None):
                self._reload(identity)
            return self._entries

    def _reload(self, identity: tuple[int, ...] | None) -> None:
        problem: str | None = None
        entries: tuple[TokenEntry, ...] = ()
        if identity is None:
            problem = f"the configuration file {self.path} cannot be found"
        else:
            try:
                entries = read_tokens(self.path)
            except OSError as exc:
                problem = f"cannot read the configuration file {self.path}: {exc.strerror}"
            except ValueError as exc:
                problem = f"the configuration file {self.path}: {exc}"
        if problem is not None and problem != self.problem:
            _log.warning("%s; none of its [[http.token]] entries is accepted until fixed", problem)
        elif problem is None and self.problem is not None:
            _log.warning("the configuration file %s is usable again", self.path)
        self._entries, self.problem = entries, problem
        self._identity, self._loaded = identity, True
