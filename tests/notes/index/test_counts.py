"""Match counts are remembered while the full-text index is unchanged, and only then.

Two servers share one state directory (as two processes would): a count one remembers is
not answered again once the other writes a note, nor once it writes one itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.index.catalog import Catalog
from fsnotes.notes.text.query import parse


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Catalog, Catalog, Path]]:
    vault = tmp_path / "notes"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\nwombat burrow\n")
    made: list[Server] = []
    for _ in range(2):
        cfg = load(
            workspaces=[str(vault)], state_dir=str(tmp_path / "state"), principal="ada", env={}
        )
        made.append(build(cfg))
    catalogs = []
    for srv in made:
        svc = srv.service.acting_for("ada")
        ws = srv.service.grants.all_workspaces()[0]
        catalogs.append(svc.catalogs.of(ws, svc.stores[ws.name]))
    catalogs[0].rescan()
    yield catalogs[0], catalogs[1], vault
    for srv in made:
        srv.close()


def test_a_count_is_answered_again_while_the_index_is_unchanged(
    pair: tuple[Catalog, Catalog, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, _other, _vault = pair
    assert mine.index.count_matches('"wombat"', 100) == 1
    asked: list[str] = []
    real = mine.index.query

    def spy(sql: str, params: Any = ()) -> list[Any]:
        asked.append(sql)
        return real(sql, params)

    monkeypatch.setattr(mine.index, "query", spy)
    assert mine.index.count_matches('"wombat"', 100) == 1
    assert not any("MATCH" in sql for sql in asked), asked  # remembered, not counted
    assert mine.index.count_matches('"wombat"', 100) == 1
    assert mine.index.count_matches('"burrow"', 100) == 1  # another term is counted
    assert any("MATCH" in sql for sql in asked)


def test_a_remembered_count_is_not_answered_after_another_process_or_this_one_writes(
    pair: tuple[Catalog, Catalog, Path],
) -> None:
    mine, other, vault = pair
    assert mine.index.count_matches('"wombat"', 100) == 1
    (vault / "b.md").write_text("# B\n\nwombat\n")
    other.refresh(("b.md",))  # the other server's connection writes
    assert mine.index.count_matches('"wombat"', 100) == 2
    (vault / "c.md").write_text("# C\n\nwombat\n")
    mine.refresh(("c.md",))  # this one's own connection writes
    assert mine.index.count_matches('"wombat"', 100) == 3
    (vault / "a.md").write_text("# A\n\nnothing here\n")
    other.refresh(("a.md",))  # a replaced note: same number of notes, one fewer match
    assert mine.index.count_matches('"wombat"', 100) == 2
    (vault / "b.md").unlink()
    mine.refresh(("b.md",))
    assert mine.index.count_matches('"wombat"', 100) == 1
    assert mine.index.count_matches('"wombat"', 1) == 1  # the bound is part of the count
    found = mine.search(parse("wombat"), (), None, 10)
    assert [h.row.parts for h in found.hits] == [("c.md",)]
