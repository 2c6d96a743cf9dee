"""The index's SQLite (fsnotes/notes/index/db.py): new enough for contentless_delete, and
without the extensions sqlean.py can load into every connection (file I/O, crypto,
regexp, ...): its environment variables turn them on (``SQLEAN_ENABLE=1``, or one at a time),
and a connection that can read or write files through SQL has no place in a jailed server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsnotes.app.server import Server
from fsnotes.notes.index.connections import IndexProblem
from fsnotes.notes.index.db import MIN_VERSION, sqlite
from tests.notes.index.test_catalog import catalog_of

# Calls into sqlean's extensions; each works in a connection of sqlean.py whose environment
# enables them (see the last test).
EXTENSION_CALLS = (
    "SELECT readfile('/etc/hostname')",
    "SELECT fileio_write('{out}', 'x')",
    "SELECT sha256('x')",
    "SELECT regexp_like('a', 'a')",
)
ENABLING = {"SQLEAN_ENABLE": "1", "SQLEAN_ENABLE_FILEIO": "1", "SQLEAN_ENABLE_CRYPTO": "1"}

_PROBE = (
    "import sys\n"
    "{imports}\n"
    "c = sqlite.connect(':memory:')\n"
    "failed = []\n"
    "for call in sys.argv[1:]:\n"
    "    try:\n"
    "        c.execute(call)\n"
    "    except sqlite.OperationalError as exc:\n"
    "        failed.append(str(exc))\n"
    "print(len(failed), failed)\n"
)


def _probe(imports: str, tmp_path: Path) -> tuple[int, str]:
    calls = [c.format(out=tmp_path / "written") for c in EXTENSION_CALLS]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(imports=imports), *calls],
        capture_output=True,
        text=True,
        env={**os.environ, **ENABLING},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    failed, _, detail = done.stdout.partition(" ")
    return int(failed), detail


def test_the_index_sqlite_is_new_enough_for_contentless_delete() -> None:
    assert sqlite.sqlite_version_info >= MIN_VERSION
    conn = sqlite.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, content='', contentless_delete=1)")
    conn.execute("INSERT INTO t(rowid, x) VALUES (1, 'copper kettle')")
    conn.execute("DELETE FROM t WHERE rowid = 1")
    assert conn.execute("SELECT count(*) FROM t WHERE t MATCH 'copper'").fetchone() == (0,)


def test_an_environment_enabling_extensions_does_not_reach_the_index(tmp_path: Path) -> None:
    failed, detail = _probe("from fsnotes.notes.index.db import sqlite", tmp_path)
    assert failed == len(EXTENSION_CALLS), detail
    assert detail.count("no such function") == len(EXTENSION_CALLS), detail
    assert not (tmp_path / "written").exists()


def test_sqlean_as_it_comes_would_answer_those_calls(tmp_path: Path) -> None:
    """What the test above guards against: sqlean.py imported plainly, same environment."""
    failed, detail = _probe("import sqlean as sqlite", tmp_path)
    assert failed == 0, detail
    assert (tmp_path / "written").read_text() == "x"


def test_the_servers_index_connections_have_no_file_functions(server: Server, vault: Path) -> None:
    (vault / "a.md").write_text("# A\n\ncopper\n")
    catalog = catalog_of(server)
    catalog.rescan()
    with pytest.raises(IndexProblem) as refused:
        catalog.index.query("SELECT readfile('/etc/hostname')")
    assert "no such function" in str(refused.value.__context__)
