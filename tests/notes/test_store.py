"""The note stores' owner: one store per workspace name, added once, read by every request."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsnotes.notes.store import NoteStore, WorkspaceStores
from sandbox.root import Root


def test_workspace_stores_are_added_once_and_read_as_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = Root.open(str(tmp_path / "a")), Root.open(str(tmp_path / "b"))
    try:
        stores = WorkspaceStores({"a": NoteStore(a)})
        seen = dict(stores)  # a reader's view is not changed by a later add
        stores.add("b", NoteStore(b))
        assert list(stores) == ["a", "b"] and len(stores) == 2 and "b" in stores
        assert stores["b"].root is b and list(seen) == ["a"]
        with pytest.raises(ValueError, match="already has a note store"):
            stores.add("a", NoteStore(b))  # a name keeps its store for the process's life
        assert stores["a"].root is a
        with pytest.raises(KeyError):
            stores["c"]
        assert not hasattr(stores, "__setitem__") and not hasattr(stores, "pop")
    finally:
        a.close()
        b.close()
