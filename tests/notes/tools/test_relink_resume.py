"""A move killed during its link update is finished by the same move called again: the
move journal says which move it was and where every link pointed before it, each note's
etag says whether the killed run rewrote it, and nothing is rewritten twice. On real files
and the state directory's journal, through the service; the kill is an exception no code
catches, raised at a chosen point of the rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsnotes.app.server import Server
from fsnotes.notes.tools import resume
from fsnotes.notes.tools.service import Notes, ServiceError
from fsnotes.state.moves import SQLMoveJournal


class Killed(BaseException):
    """The server dying: nothing after this point runs."""


def uri(vault: Path, rel: str) -> str:
    return (vault / rel).as_uri()


def acting(server: Server) -> Notes:
    return server.service.acting_for(server.config.principal)


def write(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def snapshot(vault: Path) -> dict[str, str]:
    return {
        p.relative_to(vault).as_posix(): p.read_text()
        for p in sorted(vault.rglob("*"))
        if p.is_file() and ".obsidian" not in p.parts
    }


# a/memo.md moves to the top as budget.md: links to it follow (named by its new stem, which
# now wins [[budget]]), and [[Budget]] links to projects/budget.md, which it would capture,
# get the folder they need. A rewritten [[budget]] and a captured [[Budget]] read alike:
# only the journal's plan and each note's etag tell them apart.
SRC, DST = "a/memo.md", "budget.md"
SELF_AT_A = "# Memo\n[me](memo.md) [[../projects/plan]]\n"
# Its own relative links from the top: shifted once (a second shift would lose the "../").
SELF_AT_TOP = "# Memo\n[me](budget.md) [[./projects/plan]]\n"


def setup_vault(vault: Path) -> dict[str, str]:
    write(vault, SRC, SELF_AT_A)
    write(vault, "l1.md", "to [[memo]]\n")
    write(vault, "l2.md", "to [[Budget]] and [[a/memo]]\n")
    return snapshot(vault)


def expected(before: dict[str, str]) -> dict[str, str]:
    done = dict(before)
    del done[SRC]
    done[DST] = SELF_AT_TOP
    done["l1.md"] = "to [[budget]]\n"
    done["l2.md"] = "to [[projects/budget]] and [[budget]]\n"
    done["projects/plan.md"] = before["projects/plan.md"].replace(
        "[[Budget]]", "[[projects/budget]]"
    )
    return done


def kill_after(notes: int):  # type: ignore[no-untyped-def]
    def progress(done: int, total: int) -> None:
        if done == notes:
            raise Killed

    return progress


def resumed(notes: Notes, vault: Path) -> list[str]:
    plan = resume.interrupted_move(notes, uri(vault, SRC), DST)
    assert plan is not None
    result = resume.finish_move(notes, uri(vault, SRC), DST, plan)
    assert result.resumed and result.linksNotUpdated == [] and result.path == DST
    return [u.path for u in result.linksUpdated]


def test_an_uninterrupted_move_leaves_no_journal_row(server: Server, vault: Path) -> None:
    before = setup_vault(vault)
    notes = acting(server)
    moved = notes.notes_move(uri(vault, SRC), DST, None)
    assert not moved.resumed
    assert snapshot(vault) == expected(before)
    assert resume.interrupted_move(notes, uri(vault, SRC), DST) is None


@pytest.mark.parametrize("killed_after", [1, 4], ids=["own-links-only", "every-note"])
def test_a_move_killed_during_its_rewrite_is_finished_exactly_once(
    server: Server, vault: Path, killed_after: int
) -> None:
    before = setup_vault(vault)
    notes = acting(server)
    with pytest.raises(Killed):
        notes.notes_move(uri(vault, SRC), DST, None, progress=kill_after(killed_after))
    # The moved note and its own links are done; the others as far as the run got.
    assert (vault / DST).read_text() == SELF_AT_TOP
    rewritten = resumed(acting(server), vault)
    assert snapshot(vault) == expected(before)
    left = [] if killed_after == 4 else ["l1.md", "l2.md", "projects/plan.md"]
    assert rewritten == left
    # Finished: the row is gone, and the same move is again an ordinary one (refused).
    assert resume.interrupted_move(notes, uri(vault, SRC), DST) is None
    with pytest.raises(ServiceError, match="does not exist"):
        notes.notes_move(uri(vault, SRC), DST, None)


def test_a_kill_between_the_moved_notes_rewrite_and_its_record_never_shifts_it_twice(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = setup_vault(vault)
    notes = acting(server)

    def dies(*_args: object) -> None:
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr(SQLMoveJournal, "own_done", dies)
        with pytest.raises(Killed):
            notes.notes_move(uri(vault, SRC), DST, None)
    assert (vault / DST).read_text() == SELF_AT_TOP
    assert resumed(acting(server), vault) == ["l1.md", "l2.md", "projects/plan.md"]
    assert snapshot(vault) == expected(before)


def test_without_a_journal_row_a_missing_source_is_the_usual_error(
    server: Server, vault: Path
) -> None:
    setup_vault(vault)
    notes = acting(server)
    notes.notes_move(uri(vault, SRC), DST, None, update_links=False)
    assert resume.interrupted_move(notes, uri(vault, SRC), DST) is None
    with pytest.raises(ServiceError, match="does not exist"):
        notes.notes_move(uri(vault, SRC), DST, None)
