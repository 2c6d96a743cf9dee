"""The move journal on both backends (the state directory's SQLite, PostgreSQL): a move
recorded before its rename is found by another opening of the store (another instance, or
the same server restarted) until its link update ends; one row per old path."""

from __future__ import annotations

from fsnotes.state.moves import open_moves
from fsnotes.state.shared import SharedState

PLAN = {"before": [["a", "n.md"], ["b", "n.md"]], "linkers": {"c.md": "e1"}, "etag": "e0"}


def clock() -> float:
    return 1_000_000.0


def test_an_unfinished_move_is_found_from_another_opening_until_it_ends(
    backend: SharedState,
) -> None:
    first = open_moves(backend, clock=clock)
    first.begin("notes", "a/n.md", "z/n.md", "alice", PLAN)
    again = open_moves(backend, clock=clock)  # a restarted server, or another instance
    entry = again.find("notes", "a/n.md", "z/n.md")
    assert entry is not None
    assert (entry.principal, entry.started_at, entry.plan) == ("alice", clock(), PLAN)
    assert not entry.own_done
    first.own_done("notes", "a/n.md", "z/n.md")
    entry = again.find("notes", "a/n.md", "z/n.md")
    assert entry is not None and entry.own_done
    # Only that move: another destination, another workspace, the reverse are not it.
    assert again.find("notes", "a/n.md", "y/n.md") is None
    assert again.find("other", "a/n.md", "z/n.md") is None
    assert again.find("notes", "z/n.md", "a/n.md") is None
    again.end("notes", "a/n.md", "z/n.md")
    assert first.find("notes", "a/n.md", "z/n.md") is None
    again.end("notes", "a/n.md", "z/n.md")  # ending twice changes nothing


def test_a_new_move_of_the_same_old_path_replaces_the_earlier_row(
    backend: SharedState,
) -> None:
    journal = open_moves(backend, clock=clock)
    journal.begin("notes", "a/n.md", "z/n.md", "alice", PLAN)
    journal.begin("notes", "a/n.md", "y/n.md", "bob", {"before": []})
    assert journal.find("notes", "a/n.md", "z/n.md") is None
    entry = journal.find("notes", "a/n.md", "y/n.md")
    assert entry is not None and entry.principal == "bob" and entry.plan == {"before": []}
    assert not entry.own_done
