"""Hidden folders and the index's limits: a '.git' past the per-folder entry limit or a
'.cache' past the depth limit is never listed, so it is neither skipped nor counted; the
same folder without the dot is (the limit is real). On the wire, with a spy on every open:
tests/e2e/test_hidden_folders_wire.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import fsnotes.notes.index.scan as scan
from fsnotes.app.server import Server
from fsnotes.notes.index.catalog import Catalog
from sandbox.uri import MAX_DEPTH

# The real limit is 500,000 entries: creating that many files takes 30 s on this disk, so
# the limit is lowered for the test; the code path (listdir refusing past the limit, the
# folder counted) is the same.
LOWERED_LIMIT = 200


def catalog_of(server: Server) -> Catalog:
    svc = server.service.acting_for(server.config.principal)
    ws = server.service.grants.all_workspaces()[0]
    return svc.catalogs.of(ws, svc.stores[ws.name])


def _many_files(folder: Path, count: int) -> None:
    folder.mkdir(parents=True)
    fd = os.open(folder, os.O_DIRECTORY)
    try:
        for i in range(count):
            os.close(os.open(f"{i:038x}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def test_a_hidden_folder_past_the_entry_limit_is_not_skipped_or_counted(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "MAX_FOLDER_ENTRIES", LOWERED_LIMIT)
    _many_files(vault / ".git" / "objects", LOWERED_LIMIT + 1)
    (vault / ".git" / "objects" / "plan.md").write_text("# Plan in git\n")
    report = catalog_of(server).rescan()
    assert report is not None and report.skipped_folders == 0
    svc = server.service.acting_for(server.config.principal)
    found = svc.notes_search(None, "plan", None, None, None)
    assert sorted(r.path for r in found.results) == [
        "journal/2026-11-28.md",
        "projects/budget.md",
        "projects/plan.md",
        "readme.txt",
    ]
    assert found.index.model_dump(exclude_none=True) == {  # type: ignore[union-attr]
        "complete": True,
        "indexedNotes": 5,
        "skippedFolders": 0,
    }
    # The same folder, visible: past the (lowered) limit, skipped and counted.
    (vault / ".git" / "objects").rename(vault / "objects")
    report = catalog_of(server).rescan()
    assert report is not None and report.skipped_folders == 1


def test_a_hidden_folder_past_the_depth_limit_is_not_skipped_or_counted(
    server: Server, vault: Path
) -> None:
    deep = vault.joinpath(".cache", *["x"] * (MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    (deep / "plan.md").write_text("# Plan in the cache\n")
    report = catalog_of(server).rescan()
    assert report is not None and report.skipped_folders == 0
    listed = server.service.acting_for(server.config.principal).notes_list(
        None, None, None, None, None
    )
    assert [n.path for n in listed.notes] == [
        "inbox.md",
        "journal/2026-11-28.md",
        "projects/budget.md",
        "projects/plan.md",
        "readme.txt",
    ]
    assert listed.index.skippedFolders == 0
    (vault / ".cache").rename(vault / "cache")
    report = catalog_of(server).rescan()
    assert report is not None and report.skipped_folders == 1
