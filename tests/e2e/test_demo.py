"""The main job (`make demo`) runs to the end and every one of its checks passes; without
the demo's extra installed, `fsnotes demo` says how to get it."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Run in a fresh interpreter in isolated mode (-I: no PYTHONPATH, no user site): a meta path
# finder refuses the official SDK, as an installation without the demo extra would, then
# the given entry point runs as `fsnotes demo` or `python -m fsnotes.app.demo` does.
WITHOUT_SDK = """
import runpy, sys

class NoSDK:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoSDK())
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def test_demo_session_runs_every_step() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fsnotes", "demo"], capture_output=True, text=True, timeout=110
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for step in ("Session 1", "Session 2", "Session 3", "Escape attempts", "Access granted"):
        assert step in out
    assert out.rstrip().endswith("All steps behaved as described.")


@pytest.mark.parametrize(
    "entry", [["fsnotes", "demo"], ["fsnotes.app.demo"]], ids=["fsnotes-demo", "make-demo"]
)
def test_demo_without_the_sdk_names_the_extra_to_install_in_one_line(entry: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", WITHOUT_SDK, *entry],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "pip install 'fsnotes[demo]'" in line and "mcp" in line
