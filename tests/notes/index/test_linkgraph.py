"""notes_links, notes_tags and the where filter on real files, through the service."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsnotes.app.server import Server
from fsnotes.notes.index import linkgraph
from fsnotes.notes.tools import linkservice
from fsnotes.notes.tools.models import NotesListArgs
from fsnotes.notes.tools.service import Notes, ServiceError
from fsnotes.security.grants import NotGranted


def uri(vault: Path, rel: str) -> str:
    return (vault / rel).as_uri()


def acting(server: Server) -> Notes:
    return server.service.acting_for(server.config.principal)


def write(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def serving(server: Server) -> Notes:
    """The notes as a serving server answers them: from the index as its background work
    keeps it, without the full rescan before every query that a library use gets, so what
    is checked is the check against the files."""
    notes = acting(server)
    notes.notes_list(None, None, None, None, 1)  # the first build
    server.catalogs.background = True
    return notes


def test_outgoing_links_are_resolved_and_backlinks_listed(server: Server, vault: Path) -> None:
    write(
        vault,
        "hub.md",
        "# Hub\n[[Budget]] [[budget#Costs|money]] ![[diagram.png]] [[Nowhere]]\n"
        "[plan](projects/plan.md#top) [up](../outside.md) [twice](projects/plan.md)\n",
    )
    notes = acting(server)
    result = linkservice.notes_links(notes, uri(vault, "hub.md"))
    got = [
        (o.type, o.embed, o.target, o.heading, o.status, o.path, o.count) for o in result.outgoing
    ]
    assert got == [
        ("wikilink", False, "Budget", None, "note", "projects/budget.md", 1),
        ("wikilink", False, "budget", "Costs", "note", "projects/budget.md", 1),
        ("wikilink", True, "diagram.png", None, "other", None, 1),
        ("wikilink", False, "Nowhere", None, "broken", None, 1),
        ("markdown", False, "projects/plan.md", "top", "note", "projects/plan.md", 1),
        ("markdown", False, "../outside.md", None, "outside", None, 1),
        ("markdown", False, "projects/plan.md", None, "note", "projects/plan.md", 1),
    ]
    assert result.outgoing[0].uri == uri(vault, "projects/budget.md")
    assert result.outgoingTotal == 7
    back = linkservice.notes_links(notes, uri(vault, "projects/budget.md"))
    assert [(b.path, b.links) for b in back.backlinks] == [("hub.md", 2), ("projects/plan.md", 1)]
    assert back.backlinksTotal == 2
    assert back.backlinks[1].title == "Project plan"


def test_backlinks_follow_the_files_not_a_stale_index(server: Server, vault: Path) -> None:
    notes = serving(server)
    target = uri(vault, "projects/budget.md")
    assert [b.path for b in linkservice.notes_links(notes, target).backlinks] == [
        "projects/plan.md"
    ]
    # Another program removes the link (no rescan runs: the check against the file before
    # answering notices) and adds a note with one: the first is gone at once; the new note
    # is found once the index sees it (here, the refresh a watcher's event makes).
    plan = vault / "projects/plan.md"
    plan.write_text(plan.read_text().replace("[[Budget]]", "[[Bxdget]]"))
    os.utime(plan, ns=(1, 1))
    assert linkservice.notes_links(notes, target).backlinks == []
    write(vault, "new.md", "[[projects/budget]]\n")
    catalog = server.catalogs.current()[0]
    catalog.refresh(("new.md",))
    assert [b.path for b in linkservice.notes_links(notes, target).backlinks] == ["new.md"]


def test_a_shorter_path_takes_a_name_over(server: Server, vault: Path) -> None:
    notes = acting(server)
    target = uri(vault, "projects/budget.md")
    assert [b.path for b in linkservice.notes_links(notes, target).backlinks] == [
        "projects/plan.md"
    ]
    write(vault, "budget.md", "# A budget at the top\n")
    assert linkservice.notes_links(notes, target).backlinks == []
    assert [b.path for b in linkservice.notes_links(notes, uri(vault, "budget.md")).backlinks] == [
        "projects/plan.md"
    ]


def test_links_of_a_missing_or_foreign_note_are_refused(server: Server, vault: Path) -> None:
    notes = acting(server)
    with pytest.raises(ServiceError, match="does not exist"):
        linkservice.notes_links(notes, uri(vault, "nope.md"))
    with pytest.raises(NotGranted):
        linkservice.notes_links(notes, (vault.parent / "outside" / "secret.md").as_uri())


def test_outgoing_and_backlinks_are_capped_with_their_totals(server: Server, vault: Path) -> None:
    many = linkgraph.MAX_OUTGOING + 7
    write(vault, "index.md", "".join(f"[[n{i:04d}]]\n" for i in range(many)))
    for i in range(linkgraph.MAX_BACKLINKS + 3):
        write(vault, f"back/b{i:04d}.md", "[[inbox]]\n")
    notes = acting(server)
    out = linkservice.notes_links(notes, uri(vault, "index.md"))
    assert len(out.outgoing) == linkgraph.MAX_OUTGOING and out.outgoingTotal == many
    assert [o.target for o in out.outgoing[:2]] == ["n0000", "n0001"]
    back = linkservice.notes_links(notes, uri(vault, "inbox.md"))
    assert len(back.backlinks) == linkgraph.MAX_BACKLINKS
    assert back.backlinksTotal == linkgraph.MAX_BACKLINKS + 3
    assert back.backlinks[0].path == "back/b0000.md"


def test_tags_are_listed_with_counts_nested_and_paged(server: Server, vault: Path) -> None:
    write(vault, "t1.md", "#work/money/tax #Zeta\n")
    write(vault, "t2.md", "---\ntags: [work]\n---\n#work/money\n")
    notes = acting(server)
    result = linkservice.notes_tags(notes, None, None, None, None)
    assert [(t.tag, t.notes, t.withNested) for t in result.tags] == [
        ("todo", 1, 1),
        ("work", 2, 4),  # plan.md, t2.md; with budget.md (work/money) and t1.md
        ("work/money", 2, 3),
        ("work/money/tax", 1, 1),
        ("zeta", 1, 1),
    ]
    assert result.total == 5 and result.nextCursor is None
    first = linkservice.notes_tags(notes, None, "#WORK/", None, 1)
    assert [t.tag for t in first.tags] == ["work/money"] and first.total == 2
    assert first.nextCursor is not None
    rest = linkservice.notes_tags(notes, None, "work/", first.nextCursor, 10)
    assert [t.tag for t in rest.tags] == ["work/money/tax"] and rest.nextCursor is None
    with pytest.raises(ServiceError, match="cursor"):
        linkservice.notes_tags(notes, None, None, "bm90IGEgY3Vyc29y", None)


def test_where_matches_keys_exactly_and_values_as_frontmatter_reads_them(
    server: Server, vault: Path
) -> None:
    write(vault, "w/a.md", "---\nstatus: Done\ndraft: yes\nrank: 007\nowners: [ada, Bob]\n---\n")
    write(vault, "w/b.md", "---\nstatus: open\ndraft: false\nnote:\n---\nstatus: Done\n")
    write(vault, "w/c.md", "---\nStatus: done\nowners:\n  - bob\n---\n")
    notes = acting(server)

    def listed(**where: object) -> list[str]:
        page = notes.notes_list(None, "w", None, None, None, where)  # type: ignore[arg-type]
        return [n.path for n in page.notes]

    assert listed(status="done") == ["w/a.md"]  # value case-insensitive, key exact
    assert listed(Status="DONE") == ["w/c.md"]
    assert listed(draft=True) == listed(draft="yes") == listed(draft="TRUE") == ["w/a.md"]
    assert listed(draft=False) == ["w/b.md"]
    assert listed(rank=7) == listed(rank="7") == ["w/a.md"]
    assert listed(owners="bob") == ["w/a.md", "w/c.md"]  # an item of a list
    assert listed(owners="bob", status="done") == ["w/a.md"]  # every condition
    assert listed(note=None) == listed(note="") == ["w/b.md"]  # the empty value
    assert listed(nothing="x") == []
    hits = notes.notes_search(None, "ada", None, None, None, {"owners": "BOB"})
    assert [h.path for h in hits.results] == ["w/a.md"]
    assert notes.notes_search(None, "ada", None, None, None, {"status": "open"}).results == []
    hits = notes.notes_search(None, "done", None, None, None, {"status": "open"})
    assert [h.path for h in hits.results] == ["w/b.md"]  # the body says "Done"


def test_where_on_many_or_few_notes_lists_the_same_pages(server: Server, vault: Path) -> None:
    # A pair on more notes than RARE_TAG_NOTES is filtered along the path order; fewer are
    # gathered first: both give the same pages.
    from fsnotes.notes.index import reads as index_module

    for i in range(30):
        write(vault, f"m/n{i:02d}.md", f"---\nkind: {'a' if i % 3 else 'b'}\n---\n")
    notes = acting(server)

    def pages(kind: str) -> list[list[str]]:
        out, cursor = [], None
        while True:
            page = notes.notes_list(None, None, None, cursor, 4, {"kind": kind})
            out.append([n.path for n in page.notes])
            cursor = page.nextCursor
            if cursor is None:
                return out

    gathered = pages("a"), pages("b")
    old = index_module.RARE_TAG_NOTES
    index_module.RARE_TAG_NOTES = 2
    try:
        walked = pages("a"), pages("b")
    finally:
        index_module.RARE_TAG_NOTES = old
    assert gathered == walked
    assert sum(len(p) for p in gathered[0]) == 20 and sum(len(p) for p in gathered[1]) == 10


def test_where_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="at most"):
        NotesListArgs.model_validate({"where": {"k": "x" * 501}})
    with pytest.raises(ValueError):
        NotesListArgs.model_validate({"where": {f"k{i}": 1 for i in range(9)}})
    with pytest.raises(ValueError, match="empty"):
        NotesListArgs.model_validate({"where": {"": 1}})
    with pytest.raises(ValueError):
        NotesListArgs.model_validate({"where": {"k": [1, 2]}})
