"""A state directory owned by another user: the error names the uid that runs, the owner and
the fix (issue 24: Docker creates a missing ``-v`` folder owned by root, and a ``--user``
container then said only "Operation not permitted").

The folder is real and really owned by another uid; the process that meets it really runs as
a third uid: a forked child drops to it (root is needed to make both, so the test skips
otherwise), with every module already imported, since this machine's Python lives under a
home that other uids cannot read.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsnotes.app.config import ConfigError, load
from fsnotes.app.state_dir import prepare_state_dir

RUNS_AS = 54321  # uids no account here has
OWNER = 54322

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="needs root to own files as other uids")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    # Not tmp_path: pytest's base folder is 0700, which the dropped child could not enter.
    top = Path(tempfile.mkdtemp(prefix="fsnotes-owner-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        for path in sorted(top.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        top.rmdir()


def _message_as(uid: int, state: Path) -> str:
    """What prepare_state_dir raises in a child running as ``uid`` (empty: it succeeded)."""
    config = load(state_dir=str(state), require_workspace=False, env={})
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to uid, try, report, exit without running pytest's exit
        os.close(read)
        text = ""
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            prepare_state_dir(config)
        except ConfigError as exc:
            text = str(exc)
        except BaseException as exc:
            text = f"unexpected {exc!r}"
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    os.waitpid(pid, 0)
    return out


def test_a_state_dir_owned_by_another_uid_names_both_uids_and_the_fix(shared_tmp: Path) -> None:
    state = shared_tmp / "state"
    state.mkdir(mode=0o755)
    os.chown(state, OWNER, OWNER)
    message = _message_as(RUNS_AS, state)
    assert message.startswith(f"cannot use the state directory {state}: Operation not permitted")
    assert f"fsnotes runs as uid {RUNS_AS} (gid {RUNS_AS})" in message
    assert f"{state} is owned by uid {OWNER}, mode 0755" in message
    assert f"sudo chown -R {RUNS_AS}:{RUNS_AS}" in message and "mkdir" in message
    assert stat.S_IMODE(state.stat().st_mode) == 0o755  # nothing changed


def test_a_missing_state_dir_under_a_root_owned_folder_names_that_folder(
    shared_tmp: Path,
) -> None:
    state = shared_tmp / "parent" / "state"
    state.parent.mkdir(mode=0o755)  # root's, as Docker makes a missing -v source
    message = _message_as(RUNS_AS, state)
    assert ": Permission denied" in message
    assert f"its nearest existing parent {state.parent} is owned by uid 0 (root)" in message
    assert not state.exists()


def test_the_owner_succeeds(shared_tmp: Path) -> None:
    state = shared_tmp / "state"
    state.mkdir(mode=0o755)
    os.chown(state, RUNS_AS, RUNS_AS)
    assert _message_as(RUNS_AS, state) == ""
    assert stat.S_IMODE(state.stat().st_mode) == 0o700  # tightened by its owner
