"""The inotify watcher of a server jailed by Landlock: the server is built and jailed as
`fsnotes serve` does it, then starts watching, in a child process.

Inside the jail /proc/sys is not readable, so what the watcher needs from it (the kernel's
per-user watch budget, of which it takes a quarter so that editors and sync clients keep
theirs) must be read before the jail goes up. The watches themselves are added through
/proc/self/fd from inside the jail: tests/e2e/test_index_fresh_wire.py shows them work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fsnotes.notes.index.indexer import MAX_WATCHES
from sandbox.jail import landlock_abi
from sandbox.watch import max_user_watches

pytestmark = pytest.mark.skipif(landlock_abi() is None, reason="this kernel offers no Landlock")

CHILD = r"""
import json, sys
from fsnotes.app.config import load
from fsnotes.app.server import build, jail

config = load(workspaces=[sys.argv[1]], state_dir=sys.argv[2], principal="ada")
server = build(config)
report = jail(server)
server.catalogs.start_watching()
watcher = server.catalogs.watcher
print(json.dumps({
    "applied": bool(report and report.applied),
    "budget": None if watcher is None else watcher.budget,
    "problem": server.catalogs.watch_problem,
}))
"""


def test_a_jailed_server_takes_a_quarter_of_the_kernels_watch_budget(tmp_path: Path) -> None:
    kernel = max_user_watches()
    if kernel is None:
        pytest.skip("/proc/sys/fs/inotify/max_user_watches is not readable here")
    (tmp_path / "notes").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "notes"), str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["applied"] is True, got
    assert got["problem"] is None, got
    # (Where a quarter of the kernel's budget is MAX_WATCHES or more, this cannot tell.)
    assert got["budget"] == min(MAX_WATCHES, kernel // 4), (got, kernel)
