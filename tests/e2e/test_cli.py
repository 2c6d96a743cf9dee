"""The command line: start-up problems are one clear line and exit status 2, never a traceback."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.state_helpers import SHORT_WAITS_LAUNCHER, held


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


def fsnotes_short_waits(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SHORT_WAITS_LAUNCHER, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("name", "mode", "expected"),
    [
        ("replay.sqlite3", "exclusive", "cannot open the replay database"),
        ("setup.sqlite3", "exclusive", "cannot open the setup database"),
        ("setup.sqlite3", "immediate", "cannot open the setup database"),
        ("state.lock", "flock", "another fsnotes process"),
    ],
)
def test_a_state_file_locked_by_another_process_at_start_up_is_one_line_and_exit_2(
    tmp_path: Path, name: str, mode: str, expected: str
) -> None:
    (tmp_path / "notes").mkdir()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with held(state / name, mode):
        proc = fsnotes_short_waits(
            "serve", "--workspace", str(tmp_path / "notes"), "--state-dir", str(state)
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("fsnotes: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert expected in proc.stderr and "busy" in proc.stderr
    assert proc.stdout == ""


def test_a_corrupted_database_at_start_up_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "setup.sqlite3").write_bytes(b"this is not a database\n" * 200)
    os.chmod(state / "setup.sqlite3", 0o600)
    proc = fsnotes("serve", "--workspace", str(tmp_path / "notes"), "--state-dir", str(state))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "cannot open the setup database" in proc.stderr and "not a database" in proc.stderr


def test_a_grant_database_of_the_wrong_shape_is_one_line_and_exit_2(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    foreign = sqlite3.connect(state / "setup.sqlite3")
    foreign.execute("CREATE TABLE grant_ (x)")  # not fsnotes's table: reads fail later
    foreign.commit()
    foreign.close()
    proc = fsnotes("grant", "--state-dir", str(state), "--list")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "setup database cannot be used" in proc.stderr
