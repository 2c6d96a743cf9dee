from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.wire import Wire

NOTES = {
    "groceries.md": "# Groceries\n\nmilk, eggs #shopping\n",
    "garden/groceries-list.md": "---\ntitle: Garden groceries\n---\nseeds\n",
    "plan.md": "# Plan\n\nThe plan.\nThe plan again.\n",
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "notes"
    for rel, text in NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (tmp_path / "notes-evil").mkdir()
    (tmp_path / "notes-evil" / "loot.md").write_text("# Loot\nsibling secret\n")
    (tmp_path / "outside.md").write_text("# Outside\nOUTSIDE SECRET\n")
    return ws


@pytest.fixture
def wire(workspace: Path, tmp_path: Path, resolver: str) -> Iterator[Wire]:
    w = Wire(workspace, tmp_path / "state")
    yield w
    w.close()
