"""Nothing a model does is irreversible: what notes_update, notes_move and a confirmed
notes_delete replace is kept, listed by notes_history and brought back by notes_restore.

A real built server on real files (both resolvers), acting for its principals; another
process holding the history's lock is a real process.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.tools.confirm import CONFIRM_KEY
from fsnotes.notes.tools.models import NotesDeleteArgs, NotesHistoryResult
from fsnotes.notes.tools.restore import notes_history, notes_restore
from fsnotes.notes.tools.service import Notes, ServiceError
from fsnotes.protocol.registry import InputRequired
from fsnotes.security.consent import ConsentRefused
from fsnotes.security.grants import NotGranted
from fsnotes.state import history_store
from tests.e2e.state_helpers import held


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def ada(server: Server) -> Notes:
    return server.service.acting_for("ada")


def uri(vault: Path, rel: str) -> str:
    return (vault / rel).as_uri()


def history(server: Server, vault: Path, rel: str) -> NotesHistoryResult:
    return notes_history(ada(server), uri(vault, rel), None)


def delete(server: Server, vault: Path, rel: str) -> dict[str, Any]:
    """A confirmed delete by uri, as a person accepts it."""
    notes = ada(server)
    args = NotesDeleteArgs(uri=uri(vault, rel))
    q = server.deletes.ask(notes, args)
    assert isinstance(q, InputRequired)
    answer = {CONFIRM_KEY: {"action": "accept", "content": {"note_id": rel, "confirm": True}}}
    out = server.deletes.resume(notes, args, q.state or "", answer)
    assert not isinstance(out, InputRequired)
    return out.model_dump()


# --- what is kept --------------------------------------------------------------------------


def test_update_keeps_the_replaced_bytes_with_its_principal_and_tool(
    server: Server, vault: Path
) -> None:
    before = (vault / "inbox.md").read_text()
    ada(server).notes_update(uri(vault, "inbox.md"), "# Inbox\n\nempty\n", None, None)
    ada(server).notes_update(uri(vault, "inbox.md"), None, [("empty", "full")], None)
    found = history(server, vault, "inbox.md")
    assert found.exists and found.currentEtag == sha("# Inbox\n\nfull\n")
    assert found.total == 2
    newest, oldest = found.versions
    assert (oldest.etag, oldest.size) == (sha(before), len(before.encode()))
    assert newest.etag == sha("# Inbox\n\nempty\n")
    assert {(v.principal, v.tool) for v in found.versions} == {("ada", "notes_update")}
    assert newest.version > oldest.version and newest.time >= oldest.time
    assert newest.time.endswith("Z")


def test_an_update_that_writes_nothing_keeps_nothing(server: Server, vault: Path) -> None:
    notes = ada(server)
    with pytest.raises(ServiceError, match="changed since you read it"):
        notes.notes_update(uri(vault, "inbox.md"), "x\n", None, "0" * 64)
    with pytest.raises(ServiceError, match="occurs nowhere"):
        notes.notes_update(uri(vault, "inbox.md"), None, [("no such text", "y")], None)
    same = (vault / "inbox.md").read_text()
    notes.notes_update(uri(vault, "inbox.md"), same, None, None)  # replaces nothing
    assert history(server, vault, "inbox.md").total == 0


def test_move_keeps_the_note_under_its_old_path_and_says_where_it_went(
    server: Server, vault: Path
) -> None:
    text = (vault / "inbox.md").read_text()
    ada(server).notes_move(uri(vault, "inbox.md"), "archive/inbox.md", None)
    found = history(server, vault, "inbox.md")
    assert not found.exists and found.currentEtag is None
    (version,) = found.versions
    assert (version.tool, version.movedTo, version.etag) == (
        "notes_move",
        "archive/inbox.md",
        sha(text),
    )
    assert history(server, vault, "archive/inbox.md").total == 0


def test_a_move_refused_after_its_copy_was_kept_leaves_no_version(
    server: Server, vault: Path
) -> None:
    (vault / "taken.md").write_text("# Taken\n")
    with pytest.raises(ServiceError, match="already exists"):
        ada(server).notes_move(uri(vault, "inbox.md"), "taken.md", None)
    store = server.history.store
    assert store is not None
    assert not store.has_pending(server.config.workspace_objects()[0].uri, "inbox.md")
    assert store.usage() == (0, 0)  # dropped at once, not left for a later look
    assert history(server, vault, "inbox.md").total == 0


def test_a_confirmed_delete_keeps_the_note_and_restore_brings_it_back_at_its_old_uri(
    server: Server, vault: Path
) -> None:
    text = (vault / "projects/plan.md").read_text()
    assert delete(server, vault, "projects/plan.md")["deleted"] is True
    assert not (vault / "projects/plan.md").exists()
    (version,) = history(server, vault, "projects/plan.md").versions
    assert (version.tool, version.principal, version.etag) == ("notes_delete", "ada", sha(text))
    restored = notes_restore(ada(server), uri(vault, "projects/plan.md"), version.version, None)
    assert restored.created is True and restored.keptVersion is None
    assert restored.etag == sha(text)
    assert (vault / "projects/plan.md").read_text() == text
    # and it is a note like any other again: the index knows it
    found = ada(server).notes_search(None, "Friday", None, None, None)
    assert [hit.path for hit in found.results] == ["projects/plan.md"]


def test_a_deleted_note_in_a_removed_folder_is_restored_with_its_folder(
    server: Server, vault: Path
) -> None:
    text = (vault / "journal/2026-11-28.md").read_text()
    delete(server, vault, "journal/2026-11-28.md")
    os.rmdir(vault / "journal")
    (version,) = history(server, vault, "journal/2026-11-28.md").versions
    notes_restore(ada(server), uri(vault, "journal/2026-11-28.md"), version.version, None)
    assert (vault / "journal/2026-11-28.md").read_text() == text


def test_a_declined_delete_keeps_no_version(server: Server, vault: Path) -> None:
    notes = ada(server)
    args = NotesDeleteArgs(uri=uri(vault, "inbox.md"))
    q = server.deletes.ask(notes, args)
    assert isinstance(q, InputRequired)
    out = server.deletes.resume(notes, args, q.state or "", {CONFIRM_KEY: {"action": "decline"}})
    assert not isinstance(out, InputRequired) and out.deleted is False
    assert history(server, vault, "inbox.md").total == 0


# --- restoring -----------------------------------------------------------------------------


def test_restore_over_an_existing_note_needs_its_current_etag(server: Server, vault: Path) -> None:
    original = (vault / "inbox.md").read_text()
    ada(server).notes_update(uri(vault, "inbox.md"), "rewritten\n", None, None)
    (version,) = history(server, vault, "inbox.md").versions
    with pytest.raises(ServiceError, match="never replaces a note without its current etag"):
        notes_restore(ada(server), uri(vault, "inbox.md"), version.version, None)
    assert (vault / "inbox.md").read_text() == "rewritten\n"
    done = notes_restore(ada(server), uri(vault, "inbox.md"), version.version, sha("rewritten\n"))
    assert (vault / "inbox.md").read_text() == original
    assert done.created is False and done.etag == sha(original)


def test_restore_after_an_external_edit_reports_the_etag_conflict_and_writes_nothing(
    server: Server, vault: Path
) -> None:
    ada(server).notes_update(uri(vault, "inbox.md"), "by the model\n", None, None)
    found = history(server, vault, "inbox.md")
    (vault / "inbox.md").write_text("by the person, meanwhile\n")  # an editor, not fsnotes
    with pytest.raises(ServiceError, match="changed since you read it") as caught:
        notes_restore(
            ada(server), uri(vault, "inbox.md"), found.versions[0].version, found.currentEtag
        )
    assert "Nothing was written" in str(caught.value)
    assert (vault / "inbox.md").read_text() == "by the person, meanwhile\n"
    assert history(server, vault, "inbox.md").total == 1  # no version for a write not made


def test_a_restore_is_itself_undoable(server: Server, vault: Path) -> None:
    original = (vault / "inbox.md").read_text()
    ada(server).notes_update(uri(vault, "inbox.md"), "second\n", None, None)
    (first,) = history(server, vault, "inbox.md").versions
    back = notes_restore(ada(server), uri(vault, "inbox.md"), first.version, sha("second\n"))
    assert back.keptVersion is not None
    kept = history(server, vault, "inbox.md").versions[0]
    assert (kept.version, kept.tool, kept.etag) == (
        back.keptVersion,
        "notes_restore",
        sha("second\n"),
    )
    again = notes_restore(ada(server), uri(vault, "inbox.md"), back.keptVersion, back.etag)
    assert (vault / "inbox.md").read_text() == "second\n" and again.etag == sha("second\n")
    assert sha(original) == back.etag


def test_restore_never_replaces_a_note_created_at_the_old_uri_meanwhile(
    server: Server, vault: Path
) -> None:
    delete(server, vault, "inbox.md")
    (version,) = history(server, vault, "inbox.md").versions
    (vault / "inbox.md").write_text("a new inbox, by the person\n")
    with pytest.raises(ServiceError, match="exists"):
        notes_restore(ada(server), uri(vault, "inbox.md"), version.version, None)
    assert (vault / "inbox.md").read_text() == "a new inbox, by the person\n"


def test_restore_with_an_etag_of_a_note_that_is_gone_is_refused(
    server: Server, vault: Path
) -> None:
    etag = sha((vault / "inbox.md").read_text())
    delete(server, vault, "inbox.md")
    (version,) = history(server, vault, "inbox.md").versions
    with pytest.raises(ServiceError, match="does not exist any more"):
        notes_restore(ada(server), uri(vault, "inbox.md"), version.version, etag)
    assert not (vault / "inbox.md").exists()


def test_a_version_of_another_note_cannot_be_restored_through_this_uri(
    server: Server, vault: Path
) -> None:
    ada(server).notes_update(uri(vault, "inbox.md"), "changed\n", None, None)
    (version,) = history(server, vault, "inbox.md").versions
    target = (vault / "readme.txt").read_text()
    with pytest.raises(ServiceError, match="has no version"):
        notes_restore(ada(server), uri(vault, "readme.txt"), version.version, sha(target))
    assert (vault / "readme.txt").read_text() == target


def test_history_of_a_path_that_is_no_note_is_refused(server: Server, vault: Path) -> None:
    for bad in ("image.png", ".obsidian/config.md"):
        with pytest.raises(ServiceError):
            history(server, vault, bad)
    with pytest.raises(NotGranted):
        notes_history(ada(server), (vault.parent / "outside/secret.md").as_uri(), None)


# --- who may ---------------------------------------------------------------------------------


@pytest.fixture
def shared(tmp_path: Path, resolver: str) -> Iterator[tuple[Server, Path]]:
    """``team``: ada may delete, rita may only read, eve has no grant."""
    team = tmp_path / "team"
    team.mkdir()
    (team / "plan.md").write_text("# Plan\n")
    config = tmp_path / "fsnotes.toml"
    config.write_text(
        f'principal = "ada"\n[[workspace]]\nname = "team"\npath = "{team}"\n'
        '[[grant]]\nprincipal = "ada"\nworkspace = "team"\naccess = "delete"\n'
        '[[grant]]\nprincipal = "rita"\nworkspace = "team"\naccess = "read"\n'
    )
    server = build(load(config_file=str(config), state_dir=str(tmp_path / "state"), env={}))
    yield server, team
    server.close()


def test_history_needs_read_and_restore_needs_write(shared: tuple[Server, Path]) -> None:
    server, team = shared
    plan = (team / "plan.md").as_uri()
    server.service.acting_for("ada").notes_update(plan, "# Plan v2\n", None, None)
    rita = server.service.acting_for("rita")
    found = notes_history(rita, plan, None)
    (version,) = found.versions
    assert version.principal == "ada"  # the principal of the request that replaced it
    with pytest.raises(NotGranted):
        notes_restore(rita, plan, version.version, found.currentEtag)
    with pytest.raises(NotGranted):
        notes_history(server.service.acting_for("eve"), plan, None)
    assert (team / "plan.md").read_text() == "# Plan v2\n"


def test_each_version_records_the_principal_of_its_own_request(
    shared: tuple[Server, Path],
) -> None:
    server, team = shared
    plan = (team / "plan.md").as_uri()
    ada_view = server.service.acting_for("ada")
    ada_view.notes_update(plan, "one\n", None, None)
    found = notes_history(ada_view, plan, None)
    notes_restore(ada_view, plan, found.versions[0].version, found.currentEtag)
    assert [(v.principal, v.tool) for v in notes_history(ada_view, plan, None).versions] == [
        ("ada", "notes_restore"),
        ("ada", "notes_update"),
    ]


# --- when no copy can be kept, nothing changes ------------------------------------------------


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_store, "LOCK_TIMEOUT_S", 0.2)


@pytest.mark.usefixtures("short_wait")
def test_a_busy_history_store_stops_an_update_and_a_move_and_says_why(
    server: Server, vault: Path
) -> None:
    state = server.config.state_dir
    text = (vault / "inbox.md").read_text()
    with held(state / history_store.LOCK_NAME, "flock"):
        with pytest.raises(ServiceError, match="Nothing was written: the history store is busy"):
            ada(server).notes_update(uri(vault, "inbox.md"), "new\n", None, None)
        with pytest.raises(ServiceError, match="Nothing was moved: the history store is busy"):
            ada(server).notes_move(uri(vault, "inbox.md"), "elsewhere.md", None)
        # reading the history still works (pending copies would stay unlisted meanwhile)
        assert history(server, vault, "inbox.md").total == 0
    assert (vault / "inbox.md").read_text() == text and not (vault / "elsewhere.md").exists()


@pytest.mark.usefixtures("short_wait")
def test_a_busy_history_store_stops_a_confirmed_delete_which_stays_usable(
    server: Server, vault: Path
) -> None:
    notes = ada(server)
    args = NotesDeleteArgs(uri=uri(vault, "inbox.md"))
    q = server.deletes.ask(notes, args)
    assert isinstance(q, InputRequired)
    answer = {
        CONFIRM_KEY: {"action": "accept", "content": {"note_id": "inbox.md", "confirm": True}}
    }
    lock = server.config.state_dir / history_store.LOCK_NAME
    busy = "Nothing was deleted: the history store is busy"
    with held(lock, "flock"), pytest.raises(ConsentRefused, match=busy):
        server.deletes.resume(notes, args, q.state or "", answer)
    assert (vault / "inbox.md").exists()
    done = server.deletes.resume(notes, args, q.state or "", answer)  # the same confirmation
    assert not isinstance(done, InputRequired) and done.deleted is True
    assert history(server, vault, "inbox.md").total == 1


def test_no_history_keeps_nothing_and_says_so(vault: Path, tmp_path: Path, resolver: str) -> None:
    state = tmp_path / "state"
    server = build(
        load(
            workspaces=[str(vault)],
            state_dir=str(state),
            principal="ada",
            no_history=True,
            env={},
        )
    )
    try:
        ada(server).notes_update(uri(vault, "inbox.md"), "new\n", None, None)
        ada(server).notes_move(uri(vault, "readme.txt"), "moved.txt", None)
        assert delete(server, vault, "projects/plan.md")["deleted"] is True
        with pytest.raises(ServiceError, match="keeps no history"):
            history(server, vault, "inbox.md")
        with pytest.raises(ServiceError, match="keeps no history"):
            notes_restore(ada(server), uri(vault, "inbox.md"), 1, None)
    finally:
        server.close()
    left = sorted(p.name for p in state.iterdir())
    assert not [name for name in left if name.startswith("history")], left


def test_the_environment_and_the_config_file_turn_history_off(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    ws = [str(tmp_path / "notes")]
    assert load(workspaces=ws, env={}).history.enabled is True
    assert load(workspaces=ws, env={"FSNOTES_NO_HISTORY": "1"}).history.enabled is False
    cfg = tmp_path / "c.toml"
    cfg.write_text("[history]\nenabled = false\n")
    assert load(workspaces=ws, config_file=str(cfg), env={}).history.enabled is False
