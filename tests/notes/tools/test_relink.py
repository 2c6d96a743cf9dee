"""notes_move keeps links working (updateLinks), on real files, through the service."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app.server import Server
from fsnotes.notes.store import MAX_NOTE_BYTES, NoteStore
from fsnotes.notes.tools import linkservice, relink
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.service import Notes, ServiceError
from fsnotes.security.grants import Grants


def uri(vault: Path, rel: str) -> str:
    return (vault / rel).as_uri()


def acting(server: Server) -> Notes:
    return server.service.acting_for(server.config.principal)


def write(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def snapshot(vault: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(vault)): p.read_bytes()
        for p in sorted(vault.rglob("*"))
        if p.is_file() and ".obsidian" not in p.parts
    }


FORMS = (
    "[[Budget]] [[budget|the money]] [[Budget#Costs]] ![[Budget]] [[projects/budget.md]]\n"
    "[[projects/Budget#Q1|q]] [b](projects/budget.md) [c](<projects/budget.md> 'T')\n"
    "[d](./projects/budget.md#top) `[[Budget]]` [[Budgets]]\n"
)


def test_every_form_of_link_is_rewritten_and_each_note_listed(server: Server, vault: Path) -> None:
    write(vault, "forms.md", "# Forms\n" + FORMS)
    write(vault, "deep/er/rel.md", '[up](../../projects/budget.md "title") [[budget]]\n')
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "money/my costs.md", None)
    assert (vault / "money/my costs.md").exists() and not (vault / "projects/budget.md").exists()
    assert (vault / "forms.md").read_text() == (
        "# Forms\n"
        "[[my costs]] [[my costs|the money]] [[my costs#Costs]] ![[my costs]] "
        "[[money/my costs.md]]\n"
        "[[money/my costs#Q1|q]] [b](money/my%20costs.md) [c](<money/my costs.md> 'T')\n"
        "[d](./money/my%20costs.md#top) `[[Budget]]` [[Budgets]]\n"
    )
    assert (vault / "deep/er/rel.md").read_text() == (
        '[up](../../money/my%20costs.md "title") [[my costs]]\n'
    )
    assert (vault / "projects/plan.md").read_text().endswith("See [[my costs]].\n")
    assert [(u.path, u.links) for u in moved.linksUpdated] == [
        ("deep/er/rel.md", 2),
        ("forms.md", 9),
        ("projects/plan.md", 1),
    ]
    assert moved.linksNotUpdated == []
    for done in moved.linksUpdated:
        assert notes.notes_read(done.uri, None, None).etag == done.etag
    # The index knows the rewritten links at once.
    back = linkservice.notes_links(notes, uri(vault, "money/my costs.md"))
    assert [b.path for b in back.backlinks] == ["deep/er/rel.md", "forms.md", "projects/plan.md"]


def test_links_in_code_are_left_byte_identical_and_the_note_not_listed(
    server: Server, vault: Path
) -> None:
    # Issue 26: a code sample showing link syntax is the note's text, not a link.
    howto = (
        "# Howto\n\ntext\n\n    [[Budget]] [p](projects/budget.md)\n\n"
        "``[[Budget]]`` and ```[[budget]]``` and `` a ` [[Budget]] ` b ``\n\n"
        "\t[[budget]]\n\n- item\n\n      [[Budget]] in the item's code\n"
    )
    write(vault, "howto.md", howto)
    write(vault, "mixed.md", "text\n    [[Budget]] (a lazy line: a link)\n\n    [[Budget]]\n")
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "done/roadmap.md", None)
    assert (vault / "howto.md").read_text() == howto
    assert (vault / "mixed.md").read_text() == (
        "text\n    [[roadmap]] (a lazy line: a link)\n\n    [[Budget]]\n"
    )
    updated = [(u.path, u.links) for u in moved.linksUpdated]
    assert ("mixed.md", 1) in updated and "howto.md" not in {u.path for u in moved.linksUpdated}
    back = linkservice.notes_links(notes, uri(vault, "done/roadmap.md"))
    assert "howto.md" not in [b.path for b in back.backlinks]
    assert linkservice.notes_links(notes, uri(vault, "howto.md")).outgoing == []


def test_links_that_still_name_the_note_are_left_as_written(server: Server, vault: Path) -> None:
    write(vault, "a.md", "[[Budget]] [[projects/budget]] [x](projects/budget.md)\n")
    before = snapshot(vault)
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "archive/budget.md", None)
    assert (vault / "a.md").read_text() == (
        "[[Budget]] [[archive/budget]] [x](archive/budget.md)\n"
    )
    after = snapshot(vault)
    assert after["projects/plan.md"] == before["projects/plan.md"]  # [[Budget]] still names it
    assert [u.path for u in moved.linksUpdated] == ["a.md"]


def test_a_note_taking_a_shorter_name_does_not_steal_other_links(
    server: Server, vault: Path
) -> None:
    # [[Budget]] in plan.md names projects/budget.md; moving inbox.md to budget.md at the top
    # would make it win the shortest-path tie-break: the link gets the folder it needs.
    write(vault, "inbox.md", "# Inbox\n[[inbox]] is me\n")
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "inbox.md"), "budget.md", None)
    assert (vault / "projects/plan.md").read_text().endswith("See [[projects/budget]].\n")
    assert (vault / "budget.md").read_text() == "# Inbox\n[[budget]] is me\n"
    assert [u.path for u in moved.linksUpdated] == ["budget.md", "projects/plan.md"]
    assert moved.etag == moved.linksUpdated[0].etag  # the moved note's etag now


def test_the_moved_notes_own_relative_links_follow_it(server: Server, vault: Path) -> None:
    write(
        vault,
        "projects/self.md",
        "[i](../inbox.md) ![p](img/p.png) [[./plan]] [m](missing.md) [s](self.md) "
        "[o](../../out.md) [[Budget]]\n",
    )
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "projects/self.md"), "a/b/me.md", None)
    assert (vault / "a/b/me.md").read_text() == (
        "[i](../../inbox.md) ![p](../../projects/img/p.png) [[../../projects/plan]] "
        "[m](../../projects/missing.md) [s](me.md) [o](../../out.md) [[Budget]]\n"
    )
    assert [(u.path, u.links) for u in moved.linksUpdated] == [("a/b/me.md", 5)]


def test_without_update_links_only_the_note_moves(server: Server, vault: Path) -> None:
    before = snapshot(vault)
    notes = acting(server)
    moved = notes.notes_move(
        uri(vault, "projects/budget.md"), "money/costs.md", None, update_links=False
    )
    after = snapshot(vault)
    assert after.pop("money/costs.md") == before.pop("projects/budget.md")
    assert after == before
    assert moved.linksUpdated == [] and moved.linksNotUpdated == []


def test_a_note_changed_between_its_read_and_its_write_is_named_not_overwritten(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = acting(server)
    notes.notes_list(None, None, None, None, 1)  # indexed before the race is armed
    plan = vault / "projects/plan.md"
    real_read = NoteStore.read

    def read_then_another_program_writes(store: NoteStore, parts: tuple[str, ...]) -> object:
        note = real_read(store, parts)
        if parts == ("projects", "plan.md"):
            plan.write_text("someone else's words [[Budget]]\n")
        return note

    monkeypatch.setattr(NoteStore, "read", read_then_another_program_writes)
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "money/costs.md", None)
    assert [(s.path, "changed since" in s.reason) for s in moved.linksNotUpdated] == [
        ("projects/plan.md", True)
    ]
    assert plan.read_text() == "someone else's words [[Budget]]\n"
    assert moved.linksUpdated == []


def test_a_note_the_rewrite_would_make_too_large_is_named(server: Server, vault: Path) -> None:
    head = "[[Budget]]\n"
    write(vault, "big.md", head + "x" * (MAX_NOTE_BYTES - len(head)))
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "b" * 60 + ".md", None)
    (skip,) = moved.linksNotUpdated
    assert skip.path == "big.md" and "limited to" in skip.reason
    assert (vault / "big.md").read_text().startswith("[[Budget]]\n")
    assert [u.path for u in moved.linksUpdated] == ["projects/plan.md"]


def test_a_note_that_cannot_be_read_any_more_is_named(
    server: Server, vault: Path, tmp_path: Path
) -> None:
    notes = acting(server)
    notes.notes_list(None, None, None, None, 1)
    os.link(vault / "projects/plan.md", tmp_path / "elsewhere.md")  # shared with another file
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "money/costs.md", None)
    (skip,) = moved.linksNotUpdated
    assert skip.path == "projects/plan.md" and "hard links" in skip.reason
    assert (tmp_path / "elsewhere.md").read_text().endswith("See [[Budget]].\n")


def test_a_link_no_wikilink_can_write_is_named_and_the_rest_rewritten(
    server: Server, vault: Path
) -> None:
    write(vault, "a.md", "[[Budget]] [m](projects/budget.md)\n")
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "money/c#1.md", None)
    assert (vault / "a.md").read_text() == "[[Budget]] [m](money/c%231.md)\n"
    reasons = {
        (s.path, "cannot be written as a wikilink" in s.reason) for s in moved.linksNotUpdated
    }
    assert reasons == {("a.md", True), ("projects/plan.md", True)}
    assert [u.path for u in moved.linksUpdated] == ["a.md"]


def test_a_move_that_would_rewrite_too_many_notes_is_refused_whole(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        write(vault, f"l{i}.md", "[[projects/budget]]\n")
    monkeypatch.setattr(relink, "MAX_LINK_REWRITES", 3)
    before = snapshot(vault)
    notes = acting(server)
    with pytest.raises(ServiceError, match="would rewrite links in 4 notes"):
        notes.notes_move(uri(vault, "projects/budget.md"), "money/costs.md", None)
    assert snapshot(vault) == before


def test_a_move_before_the_index_is_complete_is_refused(server: Server, vault: Path) -> None:
    notes = acting(server)
    notes.notes_list(None, None, None, None, 1)
    server.catalogs.background = True  # no rescan before the move: the index says incomplete
    server.catalogs.current()[0].index.set_meta({"complete": "0"})
    before = snapshot(vault)
    with pytest.raises(ServiceError, match="still being indexed"):
        notes.notes_move(uri(vault, "projects/budget.md"), "money/costs.md", None)
    assert snapshot(vault) == before
    notes.notes_move(uri(vault, "projects/budget.md"), "money/costs.md", None, update_links=False)
    assert (vault / "money/costs.md").exists()


def test_rewrites_go_through_the_update_notes_update_runs(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The update that notes_update runs (and whatever it records, such as history) is the
    # one a rewrite runs: every rewritten note passes through it, with the etag it was read at.
    calls: list[tuple[str, str | None]] = []
    real = Notes.update_located

    def recorded(
        self: Notes, loc: Located, content: str | None, edits: object, etag: str | None
    ) -> object:
        calls.append((loc.uri, etag))
        return real(self, loc, content, edits, etag)  # type: ignore[arg-type]

    monkeypatch.setattr(Notes, "update_located", recorded)
    write(vault, "a.md", "[[projects/budget]]\n")
    etag_a = acting(server).notes_read(uri(vault, "a.md"), None, None).etag
    moved = acting(server).notes_move(uri(vault, "projects/budget.md"), "money/costs.md", None)
    assert (uri(vault, "a.md"), etag_a) in calls
    assert sorted(c[0] for c in calls) == [u.uri for u in moved.linksUpdated]


def test_a_move_consults_the_grants_once_however_many_notes_it_rewrites(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The move is authorized once, for the moved note's workspace; each rewritten note is a
    # note of that workspace, written through the located note, not authorized again by
    # URI (1,000 linking notes were 1,000 more lookups of the grants).
    for i in range(12):
        write(vault, f"l/{i}.md", "[[projects/budget]]\n")
    consulted: list[str] = []
    real = Grants._current

    def counted(self: Grants) -> Any:
        consulted.append("grants")
        return real(self)

    monkeypatch.setattr(Grants, "_current", counted)
    notes = acting(server)
    moved = notes.notes_move(uri(vault, "projects/budget.md"), "money/costs.md", None)
    assert len(moved.linksUpdated) >= 12
    assert len(consulted) == 1, consulted  # the request's Scope, nothing per note


def test_rewrite_helpers_open_no_index_connections_of_their_own(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The helper threads of a rewrite end with the move; an index connection one of them
    # opened would be one more to open (and, once it ended, close) per move. Every index
    # write of a rewrite happens on the calling thread, however full the batch gets.
    from fsnotes.notes.index import catalog as catalog_module

    monkeypatch.setattr(catalog_module, "BATCH_NOTES", 1)
    for i in range(12):
        write(vault, f"l/{i}.md", "[[projects/budget]]\n")
    notes = acting(server)
    notes.notes_list(None, None, None, None, 1)
    connections = server.catalogs.current()[0].index._conns
    before = connections.open_count
    here, there = "projects/budget.md", "money/costs.md"
    for _ in range(3):
        moved = notes.notes_move(uri(vault, here), there, None)
        assert len(moved.linksUpdated) == 13
        here, there = there, here
    assert connections.open_count == before
