"""The command line: start-up problems are one clear line and exit status 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def fsnotes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fsnotes", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["serve"], "no workspace"),
        (["serve", "--workspace", "{tmp}/missing"], "cannot open workspace"),
        (["serve", "--workspace", "{tmp}/notes", "--state-dir", "/proc/nope"], "state directory"),
        (["serve", "--workspace", "{tmp}/notes", "--state-dir", "{tmp}/notes/.st"], "outside"),
        (["serve", "--config", "{tmp}/bad.toml"], "not valid TOML"),
        (["serve", "--config", "{tmp}/absent.toml"], "cannot read config file"),
    ],
)
def test_startup_problems_are_explained(tmp_path: Path, args: list[str], expected: str) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "bad.toml").write_text("principal = \n")
    proc = fsnotes(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_doctor_json_is_machine_readable() -> None:
    proc = fsnotes("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["layers"]["path_resolution"]["mechanism"] in ("openat2", "walk")


def test_rotate_key_keeps_old_keys(tmp_path: Path) -> None:
    first = fsnotes("rotate-key", "--state-dir", str(tmp_path / "new"))
    second = fsnotes("rotate-key", "--state-dir", str(tmp_path / "new"))
    assert first.returncode == second.returncode == 0
    assert "2 key(s)" in first.stdout and "3 key(s)" in second.stdout
