"""The index's scan removes what killed writes left, on real files (both resolvers).

Every full scan (the first one runs in the background at start) asks the Root to remove
our own stale leftovers in each folder it lists. The wire test runs the real
`fsnotes serve` over stdio: the leftovers of killed writes go once it has started, while it
answers; a temp file another live writer holds stays.
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

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.index.catalog import Catalog
from sandbox.root import REMOVE_PREFIX, TEMP_PREFIX


def temp_name() -> str:
    return TEMP_PREFIX + secrets.token_hex(8)


def hidden_names(path: Path) -> list[str]:
    return sorted(
        p.relative_to(path).as_posix()
        for p in path.rglob("*")
        if p.name.startswith((TEMP_PREFIX, REMOVE_PREFIX))
    )


def plant_leftovers(vault: Path) -> list[str]:
    """Stale temp copies (what a killed write leaves) at several depths; returns their
    relative paths. (None in hidden folders: fsnotes never writes below a hidden name.)"""
    planted = []
    for folder in ("", "projects", "journal", "new/deeper/still"):
        (vault / folder).mkdir(parents=True, exist_ok=True)
        name = (Path(folder) / temp_name()).as_posix()
        (vault / name).write_text("# Secret draft\nthe person deleted this from the note\n")
        planted.append(name)
    return planted


def catalog_of(server: Server) -> Catalog:
    svc = server.service.acting_for(server.config.principal)
    ws = server.service.grants.all_workspaces()[0]
    return svc.catalogs.of(ws, svc.stores[ws.name])


def test_a_scan_clears_every_folder_it_lists_and_leaves_notes_alone(
    server: Server, vault: Path
) -> None:
    planted = plant_leftovers(vault)
    (vault / "notatemp.md").symlink_to(vault / "inbox.md")
    (vault / ".obsidian").mkdir(exist_ok=True)
    not_ours = vault / ".obsidian" / temp_name()  # below a hidden name: never our write
    not_ours.write_text("left alone")
    before = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*"))
    catalog_of(server).rescan()
    after = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*"))
    assert after == sorted(set(before) - set(planted))
    assert hidden_names(vault) == [".obsidian/" + not_ours.name]


def test_a_stopped_scan_removes_nothing_more(server: Server, vault: Path) -> None:
    plant_leftovers(vault)
    report = catalog_of(server).rescan(stop=lambda: True)
    assert report is not None and report.cancelled
    assert len(hidden_names(vault)) == 3  # stopped after the first folder it listed


def test_a_failing_workspace_scan_is_logged_and_the_others_still_run(
    vault: Path, tmp_path: Path, resolver: str, caplog: pytest.LogCaptureFixture
) -> None:
    plant_leftovers(vault)
    other = tmp_path / "other"
    other.mkdir()
    (other / "note.md").write_text("# other\n")
    cfg = load(
        workspaces=[str(other), str(vault)], state_dir=str(tmp_path / "st"), principal="a", env={}
    )
    server = build(cfg)
    try:
        server.service.stores["other"].root.close()  # the scan of it fails; the rest go on
        catalogs = server.catalogs

        async def one_round() -> None:
            for catalog in catalogs.current():
                await catalogs._rescan(catalog)

        anyio.run(one_round)
    finally:
        server.close()
    assert hidden_names(vault) == []
    assert "rescan of 'other' stopped: ValueError" in caplog.text
    assert str(other) not in caplog.text


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
