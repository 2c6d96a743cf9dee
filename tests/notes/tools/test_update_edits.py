"""notes_update with edits addressed by heading and by frontmatter key, on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsnotes.app.server import Server
from fsnotes.notes.store import etag_of
from fsnotes.notes.text.edits import FrontmatterEdit, SectionEdit, TextEdit
from fsnotes.notes.tools.models import NotesUpdateArgs
from fsnotes.notes.tools.service import ServiceError

PLAN = (
    "---\ntitle: Project plan\ntags: [work]\n---\n# Plan\n\n"
    "Ship the plan by Friday.\nSee [[Budget]].\n"
)


def test_heading_and_frontmatter_edits_apply_in_order_in_one_write(
    server: Server, vault: Path
) -> None:
    svc = server.service.acting_for(server.config.principal)
    uri = (vault / "projects/plan.md").as_uri()
    etag = svc.notes_read(uri, None, None).etag
    result = svc.notes_update(
        uri,
        None,
        [
            SectionEdit("Plan", "append", "- order wood"),
            FrontmatterEdit("status", "set", "active"),
            FrontmatterEdit("tags", "set", ["work", "shed"]),
            TextEdit("Friday", "Monday"),
        ],
        etag,
    )
    text = (vault / "projects/plan.md").read_text()
    assert text == (
        "---\ntitle: Project plan\ntags: [work, shed]\nstatus: active\n---\n# Plan\n\n"
        "Ship the plan by Monday.\nSee [[Budget]].\n- order wood\n"
    )
    assert result.etag == etag_of(text.encode())
    # The index saw the write: the new tag finds the note.
    listed = svc.notes_list(None, None, "shed", None, None)
    assert [n.path for n in listed.notes] == ["projects/plan.md"]


def test_a_failing_edit_writes_nothing_and_names_the_candidates(
    server: Server, vault: Path
) -> None:
    note = vault / "projects/plan.md"
    note.write_text(PLAN + "\n## Shed\n\nwood\n\n# Archive\n\n## Shed\n\nold\n")
    before = note.read_bytes()
    svc = server.service.acting_for(server.config.principal)
    uri = note.as_uri()
    with pytest.raises(ServiceError) as err:
        svc.notes_update(
            uri,
            None,
            [FrontmatterEdit("status", "set", "x"), SectionEdit("Shed", "append", "more")],
            None,
        )
    assert str(err.value).startswith("Edit 2: The heading path 'Shed' matches 2 headings")
    # Lines as edit 2 saw them, after edit 1 added a frontmatter line.
    assert "'Plan > Shed' (line 11)" in str(err.value)
    assert "'Archive > Shed' (line 17)" in str(err.value)
    assert str(err.value).endswith("Nothing was written.")
    with pytest.raises(ServiceError, match="Edit 1: No heading matches 'Budget'"):
        svc.notes_update(uri, None, [SectionEdit("Budget", "replace", "x")], None)
    with pytest.raises(ServiceError, match="Edit 1: The frontmatter key 'a: b'"):
        svc.notes_update(uri, None, [FrontmatterEdit("a: b", "set", 1)], None)
    with pytest.raises(ServiceError, match="has no key 'status'"):
        svc.notes_update(uri, None, [FrontmatterEdit("status", "remove")], None)
    assert note.read_bytes() == before
    svc.notes_update(uri, None, [SectionEdit("Archive > Shed", "replace", "gone")], None)
    assert note.read_text().endswith("# Archive\n\n## Shed\n\ngone\n")


def test_a_structured_edit_with_a_stale_etag_writes_nothing(server: Server, vault: Path) -> None:
    svc = server.service.acting_for(server.config.principal)
    uri = (vault / "projects/plan.md").as_uri()
    etag = svc.notes_read(uri, None, None).etag
    (vault / "projects/plan.md").write_text(PLAN + "changed outside\n")
    with pytest.raises(ServiceError, match="changed since you read it"):
        svc.notes_update(uri, None, [FrontmatterEdit("status", "set", "x")], etag)
    assert (vault / "projects/plan.md").read_text() == PLAN + "changed outside\n"


def test_frontmatter_set_creates_the_block_and_keeps_the_rest(server: Server, vault: Path) -> None:
    svc = server.service.acting_for(server.config.principal)
    uri = (vault / "inbox.md").as_uri()
    before = (vault / "inbox.md").read_text()
    svc.notes_update(uri, None, [FrontmatterEdit("due", "set", "2026-12-05")], None)
    assert (vault / "inbox.md").read_text() == "---\ndue: 2026-12-05\n---\n" + before
    assert svc.notes_read(uri, None, None).frontmatter == {"due": "2026-12-05"}


def test_old_calls_still_validate_and_every_edit_kind_converts() -> None:
    args = NotesUpdateArgs.model_validate(
        {
            "uri": "file:///n/a.md",
            "edits": [
                {"oldText": "a", "newText": "b"},
                {"heading": "A > B", "op": "prepend", "text": "x"},
                {"frontmatterKey": "k", "op": "set", "value": None},
                {"frontmatterKey": "k", "op": "remove"},
            ],
        }
    )
    assert [e.as_op() for e in args.edits or []] == [
        TextEdit("a", "b"),
        SectionEdit("A > B", "prepend", "x"),
        FrontmatterEdit("k", "set", None),
        FrontmatterEdit("k", "remove"),
    ]
