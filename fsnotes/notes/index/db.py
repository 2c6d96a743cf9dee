"""The SQLite library the search index runs on: sqlean.py's, not the system's.

Why: the index keeps no copy of a note's text (excerpts and feedback read the note's file,
see :mod:`fsnotes.notes.index.texts`), so its FTS5 tables are *contentless*, and taking a
changed or deleted note's words out of a contentless table needs FTS5's
``contentless_delete`` option: SQLite 3.43 (2023) or newer. The standard library's
``sqlite3`` links whatever SQLite the system has: 3.40 on Debian 12 (the Docker image's
base), 3.37 on Ubuntu 22.04. ``sqlean.py`` is the standard library's ``sqlite3`` module
built with its own, current SQLite (3.50 in the wheels for Linux x86_64 and aarch64 and
macOS arm64; 3.45 for macOS x86_64, 3.49 for Windows), so the index behaves the same
everywhere. Only the index uses it; the state stores (history, replay, tasks, audit) keep
the standard library's.

sqlean also bundles SQLite extensions (crypto, file I/O, regexp, ...), loaded into every
connection when its environment says so (``SQLEAN_ENABLE=1``, or ``SQLEAN_ENABLE_FILEIO=1``
and the like, from whoever started the server): they are turned off here, at import, before
any connection (``SQLEAN_ENABLE=0`` overrides the per-extension switches), so the index's
connections have SQLite's own functions only (no SQL function that reads or writes a file
exists in them; tests/notes/index/test_db.py).

To mypy this module's ``sqlite`` is the standard library's ``sqlite3``: sqlean ships no
type information, and its API is that module's (it is a fork of it).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    sqlite = sqlite3
else:
    import sqlean as sqlite
    import sqlean.extensions

    sqlean.extensions.disable_all()

# contentless_delete=1 (see the module docstring).
MIN_VERSION = (3, 43, 0)

__all__ = ["MIN_VERSION", "sqlite"]
