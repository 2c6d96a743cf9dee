"""The main job (`make demo`) runs to the end and every one of its checks passes."""

from __future__ import annotations

import subprocess
import sys


def test_demo_session_runs_every_step() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fsnotes", "demo"], capture_output=True, text=True, timeout=110
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for step in ("Session 1", "Session 2", "Session 3", "Escape attempts", "Access granted"):
        assert step in out
    assert out.rstrip().endswith("All steps behaved as described.")
