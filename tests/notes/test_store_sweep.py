"""NoteStore.sweep_leftovers and the server's start-up sweep, on real files (both resolvers).

The wire test runs the real `fsnotes serve` over stdio: the leftovers of killed writes go
once it has started, while it answers; a temp file another live writer holds stays.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from e2e.wire import LEGACY, Wire

from fsnotes.notes.store import NoteStore
from fsnotes.server import Server, sweep_workspaces
from sandbox.root import REMOVE_PREFIX, TEMP_PREFIX, Root


def temp_name() -> str:
    return TEMP_PREFIX + secrets.token_hex(8)


def hidden_names(path: Path) -> list[str]:
    return sorted(
        p.relative_to(path).as_posix()
        for p in path.rglob("*")
        if p.name.startswith((TEMP_PREFIX, REMOVE_PREFIX))
    )


def plant_leftovers(vault: Path) -> list[str]:
    """Stale temp copies (what a killed write leaves) at several depths, hidden folders
    included; returns their relative paths."""
    planted = []
    for folder in ("", "projects", "journal", ".obsidian", "new/deeper/still"):
        (vault / folder).mkdir(parents=True, exist_ok=True)
        name = (Path(folder) / temp_name()).as_posix()
        (vault / name).write_text("# Secret draft\nthe person deleted this from the note\n")
        planted.append(name)
    return planted


def test_sweep_leftovers_clears_every_folder_and_leaves_notes_alone(
    server: Server, vault: Path
) -> None:
    planted = plant_leftovers(vault)
    (vault / "notatemp.md").symlink_to(vault / "inbox.md")
    before = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*"))
    store = server.service.stores["notes"]
    assert store.sweep_leftovers() == len(planted)
    after = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*"))
    assert after == sorted(set(before) - set(planted))
    assert hidden_names(vault) == []


def test_sweep_leftovers_stops_at_its_checkpoint(server: Server, vault: Path) -> None:
    plant_leftovers(vault)

    class Stop(Exception):
        pass

    def checkpoint() -> None:
        raise Stop

    with pytest.raises(Stop):
        server.service.stores["notes"].sweep_leftovers(checkpoint)
    assert len(hidden_names(vault)) == 5  # stopped before removing anything


def test_a_failing_workspace_sweep_is_logged_and_the_others_still_run(
    vault: Path, resolver: str, caplog: pytest.LogCaptureFixture
) -> None:
    plant_leftovers(vault)
    closed = Root.open(vault)
    closed.close()  # a workspace whose Root is gone: the sweep of it fails, the rest go on
    with Root.open(vault) as root:
        stores = {"gone": NoteStore(closed), "notes": NoteStore(root)}
        anyio.run(sweep_workspaces, stores)
    assert hidden_names(vault) == []
    assert "leftover sweep of workspace 'gone' stopped: ValueError" in caplog.text
    assert str(vault) not in caplog.text


HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("holding", flush=True)
    sys.stdin.read()
    """
)


def test_the_server_sweeps_leftovers_after_start_and_keeps_a_live_writers(
    vault: Path, tmp_path: Path, resolver: str
) -> None:
    planted = plant_leftovers(vault)
    outside = tmp_path / "outside" / temp_name()
    outside.write_text("not ours to touch: outside every workspace")
    live = vault / "projects" / temp_name()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(live)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
    wire = Wire(vault, tmp_path / "state")
    try:
        init = wire.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "wire-test", "version": "1"},
            },
        )
        assert "result" in init
        deadline = time.monotonic() + 10
        while hidden_names(vault) != [live.relative_to(vault).as_posix()]:
            assert time.monotonic() < deadline, hidden_names(vault)
            time.sleep(0.02)
        listed = wire.tool("notes_list", {}, caps=None)["result"]
        assert listed.get("isError") is not True
        assert all(not n["path"].startswith(".") for n in listed["structuredContent"]["notes"])
    finally:
        err = wire.close()
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    assert live.exists() and outside.exists()
    for name in planted:
        assert not (vault / name).exists()
    assert str(vault) not in err
