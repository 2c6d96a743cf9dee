"""The notes tools' domain logic on real files, for both resolution paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsnotes.app.server import Server
from fsnotes.notes.store import etag_of
from fsnotes.notes.tools.resources import _list as list_resources
from fsnotes.notes.tools.service import ServiceError
from fsnotes.security.grants import NotGranted


def uri(vault: Path, rel: str) -> str:
    return (vault / rel).as_uri()


def test_workspaces_list(server: Server, vault: Path) -> None:
    assert server.service.acting_for(server.config.principal).workspaces_list().model_dump()[
        "workspaces"
    ] == [{"uri": vault.as_uri(), "name": "notes", "access": "delete"}]


def test_list_skips_hidden_non_notes_and_paginates(server: Server, vault: Path) -> None:
    svc = server.service.acting_for(server.config.principal)
    page = svc.notes_list(None, None, None, None, 2)
    assert [n.path for n in page.notes] == ["inbox.md", "journal/2026-11-28.md"]
    rest = svc.notes_list(None, None, None, page.nextCursor, 10)
    assert [n.path for n in rest.notes] == [
        "projects/budget.md",
        "projects/plan.md",
        "readme.txt",
    ]
    assert rest.nextCursor is None
    assert [n.path for n in svc.notes_list(None, "projects", "work", None, None).notes] == [
        "projects/budget.md",
        "projects/plan.md",
    ]
    with pytest.raises(ServiceError, match="cursor"):
        svc.notes_list(None, None, None, "not-a-cursor", None)


def test_unaddressable_names_on_disk_are_skipped_not_fatal(server: Server, vault: Path) -> None:
    # Names no URI or relative path can express (a backslash, a control character, bytes
    # that are not UTF-8) can still exist on disk; one of them must not break listing,
    # searching or resource listing for the whole workspace.
    (vault / "back\\slash.md").write_text("# plan b\n")
    (vault / "tab\tname.md").write_text("# plan t\n")
    os.mkdir(os.fsencode(vault / "dir") + b"\xff")
    with open(os.fsencode(vault) + b"/dir\xff/latin1-\xe9.md", "w") as f:
        f.write("# plan l\n")
    svc = server.service.acting_for(server.config.principal)
    listed = [n.path for n in svc.notes_list(None, None, None, None, None).notes]
    assert listed == [
        "inbox.md",
        "journal/2026-11-28.md",
        "projects/budget.md",
        "projects/plan.md",
        "readme.txt",
    ]
    found = {r.path for r in svc.notes_search(None, "plan", None, None, None).results}
    assert found == {
        "projects/plan.md",
        "projects/budget.md",
        "readme.txt",
        "journal/2026-11-28.md",
    }
    resources, _cursor = list_resources(svc, None)
    assert [r["name"] for r in resources] == [*listed, "image.png"]  # then the attachment


def _long_note_path(vault: Path) -> list[str]:
    """Names whose relative path fits the limits but whose URI (with the workspace's own
    path in front) would be longer than layer 1 accepts."""
    left = 4095 - len(os.fsencode(vault)) + 10
    names = []
    while left > 210:
        names.append("a" * 200)
        left -= 201
    names.append("n" * (left - 3) + ".md")
    return names


def test_create_refuses_a_path_whose_uri_would_be_too_long(server: Server, vault: Path) -> None:
    names = _long_note_path(vault)
    with pytest.raises(ServiceError, match="path is"):
        server.service.acting_for(server.config.principal).notes_create(
            None, "/".join(names), "# long\n"
        )
    assert not (vault / names[0]).exists()


def test_a_note_too_deep_for_a_uri_does_not_break_listing(server: Server, vault: Path) -> None:
    # Made by someone else on disk (an absolute path this long is over PATH_MAX, so the
    # directories are made one at a time below descriptors).
    names = _long_note_path(vault)
    fd = os.open(vault, os.O_PATH | os.O_DIRECTORY)
    try:
        for name in names[:-1]:
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_PATH | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.close(os.open(names[-1], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    svc = server.service.acting_for(server.config.principal)
    listed = [n.path for n in svc.notes_list(None, None, None, None, None).notes]
    assert listed == [
        "inbox.md",
        "journal/2026-11-28.md",
        "projects/budget.md",
        "projects/plan.md",
        "readme.txt",
    ]
    assert svc.notes_search(None, "plan", None, None, None).total == 4
    resources, _cursor = list_resources(svc, None)
    assert [r["name"] for r in resources] == [*listed, "image.png"]  # then the attachment


def test_read_full_and_range(server: Server, vault: Path) -> None:
    out = server.service.acting_for(server.config.principal).notes_read(
        uri(vault, "projects/plan.md"), None, None
    )
    assert out.title == "Project plan"
    assert out.tags == ["work"]
    assert out.etag == etag_of((vault / "projects/plan.md").read_bytes())
    assert {"type": "wikilink", "target": "Budget"} in [link.model_dump() for link in out.links]
    part = server.service.acting_for(server.config.principal).notes_read(
        uri(vault, "projects/plan.md"), 7, 8
    )
    assert part.content == "Ship the plan by Friday.\nSee [[Budget]]."
    assert part.totalLines == 8
    with pytest.raises(ServiceError, match="outside the note"):
        server.service.acting_for(server.config.principal).notes_read(
            uri(vault, "projects/plan.md"), 50, None
        )


@pytest.mark.parametrize(
    "bad",
    [
        "file:///etc/passwd",
        "{vault}-evil/x.md",
        "{vault}/../outside/secret.md",
        "{vault}/%2e%2e/outside/secret.md",
        "{vault}/%2E%2E/outside/secret.md",
        "{vault}/..%2foutside/secret.md",
        "{vault}/.obsidian/config.md",
        "{vault}/image.png",
        "{vault}/missing.md",
    ],
)
def test_read_refuses_escapes_and_non_notes(server: Server, vault: Path, bad: str) -> None:
    target = bad.replace("{vault}", vault.as_uri())
    with pytest.raises((ServiceError, NotGranted)) as info:
        server.service.acting_for(server.config.principal).notes_read(target, None, None)
    # never a host path the caller did not send
    assert str(vault.parent / "outside") not in str(info.value)


def test_symlinked_note_is_never_followed(server: Server, vault: Path) -> None:
    os.symlink(vault.parent / "outside" / "secret.md", vault / "link.md")
    with pytest.raises(ServiceError, match=r"symbolic link|not a regular"):
        server.service.acting_for(server.config.principal).notes_read(
            uri(vault, "link.md"), None, None
        )


def test_search_ranks_title_matches_first(server: Server, vault: Path) -> None:
    out = server.service.acting_for(server.config.principal).notes_search(
        None, "plan", None, None, None
    )
    paths = [r.path for r in out.results]
    assert paths[0] == "projects/plan.md"
    assert set(paths) >= {"projects/budget.md", "readme.txt", "journal/2026-11-28.md"}
    assert out.results[0].snippets[0].line >= 1
    only_work = server.service.acting_for(server.config.principal).notes_search(
        None, "plan", None, "work", None
    )
    assert [r.path for r in only_work.results] == ["projects/plan.md", "projects/budget.md"]
    # Any word matches; no note holds both, so none holds every term.
    either = server.service.acting_for(server.config.principal).notes_search(
        None, "plan zebra", None, None, None
    )
    assert {r.path for r in either.results} == set(paths)
    assert not any(r.allTerms for r in either.results)


def test_create_refuses_overwrite_and_bad_paths(server: Server, vault: Path) -> None:
    svc = server.service.acting_for(server.config.principal)
    out = svc.notes_create(None, "new/deep/idea.md", "# Idea\n")
    assert (vault / "new/deep/idea.md").read_text() == "# Idea\n"
    assert out.uri == uri(vault, "new/deep/idea.md")
    with pytest.raises(ServiceError, match="already exists"):
        svc.notes_create(None, "inbox.md", "clobber")
    assert (vault / "inbox.md").read_text().startswith("# Inbox")
    for bad in ("../outside/x.md", "/etc/x.md", "notes.exe", ".hidden/x.md", "a\\..\\b.md"):
        with pytest.raises(ServiceError):
            svc.notes_create(None, bad, "x")
    assert not (vault.parent / "outside" / "x.md").exists()


def test_create_through_dangling_symlink_creates_nothing_outside(
    server: Server, vault: Path
) -> None:
    os.symlink(vault.parent / "outside" / "planted.md", vault / "dangling.md")
    with pytest.raises(ServiceError):
        server.service.acting_for(server.config.principal).notes_create(
            None, "dangling.md", "pwned"
        )
    assert not (vault.parent / "outside" / "planted.md").exists()


def test_update_with_stale_etag_writes_nothing(server: Server, vault: Path) -> None:
    svc = server.service.acting_for(server.config.principal)
    u = uri(vault, "inbox.md")
    etag = svc.notes_read(u, None, None).etag
    new = svc.notes_update(u, "# Inbox\n\nnew\n", None, etag)
    assert (vault / "inbox.md").read_text() == "# Inbox\n\nnew\n"
    assert new.etag == etag_of(b"# Inbox\n\nnew\n")
    with pytest.raises(ServiceError, match="changed since you read it"):
        svc.notes_update(u, "stale write", None, etag)
    assert (vault / "inbox.md").read_text() == "# Inbox\n\nnew\n"


def test_edits_must_match_exactly_once(server: Server, vault: Path) -> None:
    svc = server.service.acting_for(server.config.principal)
    u = uri(vault, "inbox.md")
    before = (vault / "inbox.md").read_text()
    with pytest.raises(ServiceError, match="2 times"):
        svc.notes_update(u, None, [("#todo", "#done")], None)
    with pytest.raises(ServiceError, match="nowhere"):
        svc.notes_update(u, None, [("Buy milk", "Buy oat milk"), ("absent", "x")], None)
    assert (vault / "inbox.md").read_text() == before
    svc.notes_update(u, None, [("Buy milk #todo", "Buy milk #done")], None)
    assert "Buy milk #done" in (vault / "inbox.md").read_text()


def test_move_never_overwrites_and_checks_etag(server: Server, vault: Path) -> None:
    svc = server.service.acting_for(server.config.principal)
    u = uri(vault, "readme.txt")
    etag = svc.notes_read(u, None, None).etag
    with pytest.raises(ServiceError, match="already exists"):
        svc.notes_move(u, "inbox.md", None)
    with pytest.raises(ServiceError, match="changed since"):
        svc.notes_move(u, "archive/readme.txt", "0" * 64)
    out = svc.notes_move(u, "archive/readme.txt", etag)
    assert out.uri == uri(vault, "archive/readme.txt")
    assert not (vault / "readme.txt").exists()
    assert (vault / "archive/readme.txt").read_text().startswith("Plain text")
    with pytest.raises(ServiceError):
        svc.notes_move(out.uri, "../outside/readme.txt", None)


def test_read_only_grant_refuses_writes(vault: Path, tmp_path: Path, resolver: str) -> None:
    from fsnotes.app.config import load
    from fsnotes.app.server import build

    srv = build(
        load(workspaces=[str(vault)], read_only=True, state_dir=str(tmp_path / "s"), env={})
    )
    try:
        with pytest.raises(NotGranted, match="needs 'write'"):
            srv.service.acting_for(srv.config.principal).notes_create(None, "x.md", "x")
        assert (
            srv.service.acting_for(srv.config.principal)
            .notes_list(None, None, None, None, None)
            .notes
        )
    finally:
        srv.close()
