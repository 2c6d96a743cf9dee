"""A real workspace on disk, a state dir outside it, and a built server (both resolvers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build

VAULT = {
    "inbox.md": "# Inbox\n\nBuy milk #todo\nCall the plumber #todo\n",
    "projects/plan.md": (
        "---\ntitle: Project plan\ntags: [work]\n---\n# Plan\n\n"
        "Ship the plan by Friday.\nSee [[Budget]].\n"
    ),
    "projects/budget.md": "# Budget\n\nThe plan costs 3 coins. #work/money\n",
    "journal/2026-11-28.md": "# Saturday\n\nWent hiking. Planned the trip.\n",
    "readme.txt": "Plain text note about the plan.\n",
    "image.png": "not a note",
    ".obsidian/config.md": "# hidden\n",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    for rel, text in VAULT.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("# Secret\nTOP SECRET\n")
    return root


@pytest.fixture
def server(vault: Path, tmp_path: Path, resolver: str) -> Iterator[Server]:
    cfg = load(workspaces=[str(vault)], state_dir=str(tmp_path / "state"), principal="ada", env={})
    srv = build(cfg)
    assert all(r.resolver == resolver for r in srv.roots)
    yield srv
    srv.close()
