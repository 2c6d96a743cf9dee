"""The catalog and its index on real files: ranking, paging, filters, freshness, rebuilds."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.index import ranking
from fsnotes.notes.index.catalog import Catalog
from fsnotes.notes.index.indexer import fingerprint
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import SCHEMA_VERSION
from fsnotes.notes.tools.service import ServiceError


def catalog_of(server: Server) -> Catalog:
    svc = server.service.acting_for(server.config.principal)
    ws = server.service.grants.all_workspaces()[0]
    return svc.catalogs.of(ws, svc.stores[ws.name])


def paths(found: dict[str, object]) -> list[str]:
    return [str(r.path) for r in found.results]  # type: ignore[attr-defined]


# --- ranking -----------------------------------------------------------------------------


def test_a_title_match_ranks_above_a_body_full_of_the_word(server: Server, vault: Path) -> None:
    (vault / "garden").mkdir()
    (vault / "garden" / "shed.md").write_text("# Shed\n\n" + "Timber and paint. " * 60)
    (vault / "shopping.md").write_text("# Shopping\n\nshed shed shed shed shed\n")
    found = server.service.acting_for(server.config.principal).notes_search(
        None, "shed", None, None, None
    )
    assert paths(found)[:2] == ["garden/shed.md", "shopping.md"]
    scores = [r.score for r in found.results]  # type: ignore[index]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > 2 > scores[1]  # title and path tiers: +2; the body match alone: <= 1


def test_beyond_the_ranking_window_title_matches_still_come_first_and_total_is_exact(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranking, "RANK_WINDOW", 3)
    monkeypatch.setattr(ranking, "RANK_NEWEST", 3)
    (vault / "old.md").write_text("# Kettle\n\nAn old note.\n")
    svc = server.service.acting_for(server.config.principal)
    svc.notes_search(None, "kettle", None, None, None)  # indexes old.md first (oldest rowid)
    for i in range(8):
        (vault / f"n{i}.md").write_text(f"# Note {i}\n\nThe kettle, again.\n")
    found = svc.notes_search(None, "kettle", None, None, 3)  # the window is never below a page
    assert found.total == 9  # counted in full, not just the window
    assert paths(found)[0] == "old.md"  # outside the 3 newest, still first by its title
    assert len(found.results) == 3  # type: ignore[arg-type]


def test_only_very_common_words_past_the_window_rank_by_tiers_then_newest_not_by_bm25(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every note holds "the" (very common from half of 20 notes on); the window is cut to 3
    # so that the word alone is over it, as "the" is at 100k notes.
    monkeypatch.setattr(ranking, "RANK_WINDOW", 3)
    monkeypatch.setattr(ranking, "RANK_NEWEST", 3)
    svc = server.service.acting_for(server.config.principal)
    (vault / "kettle.md").write_text("# The kettle\n\nthe oldest note\n")
    svc.notes_search(None, "the", None, None, None)  # indexed first: the oldest rowid
    for i in range(24):
        # n21 is the one bm25 would put first of the newest three: "the" over and over.
        body = "the " * 30 if i == 21 else f"the word{i} and more words besides"
        (vault / f"n{i}.md").write_text(f"# Note {i}\n\n{body}\n")
        svc.notes_search(None, "kettle", None, None, None)  # each indexed in turn: newer
    found = svc.notes_search(None, "the", None, None, 4)
    # The title tier first, then the newest: unscored (bm25 would have ranked n21 second).
    assert paths(found) == ["kettle.md", "n23.md", "n22.md", "n21.md"]
    assert [r.score for r in found.results] == [1.0, 0.0, 0.0, 0.0]  # type: ignore[attr-defined]
    assert found.rankedAll is False  # type: ignore[attr-defined]
    # Under the window, the same words are ranked by bm25 as before.
    monkeypatch.setattr(ranking, "RANK_WINDOW", 4000)
    monkeypatch.setattr(ranking, "RANK_NEWEST", 1000)
    ranked = svc.notes_search(None, "the", None, None, 2)
    assert paths(ranked) == ["kettle.md", "n21.md"]
    assert found.total == ranked.total == found.scanned  # type: ignore[attr-defined]


def test_every_hit_has_an_excerpt_on_the_line_of_its_match(server: Server, vault: Path) -> None:
    (vault / "long.md").write_text(
        "---\ntags: [x]\n---\n# Long\n\n" + "filler words here\n" * 40 + "the copper kettle\n"
    )
    found = server.service.acting_for(server.config.principal).notes_search(
        None, '"copper kettle"', None, None, None
    )
    [hit] = found.results  # type: ignore[misc]
    [snippet] = hit.snippets
    assert snippet.text.endswith("the **copper kettle**")  # a phrase is marked as one
    assert snippet.line == 46  # frontmatter (3 lines) + heading + blank + 40 fillers + 1


# --- query syntax --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "plan AND",
        "OR plan",
        "NOT plan",
        "NEAR(plan friday)",
        'plan"',
        '"plan',
        "plan*friday",
        "title:plan",
        "^plan",
        "-plan",
        "(plan",
        "plan)",
        "{title} : plan",
        "+plan",
        "plan\x00",
        "fri* AND",
    ],
)
def test_fts_syntax_in_a_query_is_just_words(server: Server, vault: Path, query: str) -> None:
    # A note holding the query's text literally: its words, in order, are all there.
    (vault / "literal.md").write_text(f"# Literal\n\n{query} friday\n")
    found = server.service.acting_for(server.config.principal).notes_search(
        None, query, None, None, None
    )
    assert "literal.md" in paths(found)


@pytest.mark.parametrize("query", ["***", '""', "()", "-- ::", "a*", "\ue000\x00"])
def test_a_query_without_words_is_one_sentence_with_a_hint(server: Server, query: str) -> None:
    with pytest.raises(ServiceError) as raised:
        server.service.acting_for(server.config.principal).notes_search(
            None, query, None, None, None
        )
    message = str(raised.value)
    assert message.endswith(".") and "sqlite" not in message.lower() and "fts5" not in message


def test_fts_syntax_in_note_content_is_just_text(server: Server, vault: Path) -> None:
    (vault / "syntax.md").write_text('# Syntax\n\nNEAR("x" y) AND {title}:* "quoted" OR ^zinc\n')
    svc = server.service.acting_for(server.config.principal)
    assert paths(svc.notes_search(None, "zinc", None, None, None)) == ["syntax.md"]
    assert paths(svc.notes_search(None, '"quoted or zinc"', None, None, None)) == ["syntax.md"]
    assert paths(svc.notes_search(None, "near", None, None, None)) == ["syntax.md"]


def test_the_index_scope_words_cannot_be_reached_from_a_query(server: Server) -> None:
    # Folder and tag words in the index start with a private-use character, which the
    # query parser drops: the exact word the index holds for folder 'projects' finds nothing.
    from fsnotes.notes.index.schema import key_of, scope_token

    token = scope_token("f", key_of(("projects",)))
    assert (
        server.service.acting_for(server.config.principal)
        .notes_search(None, token, None, None, None)
        .total
        == 0
    )
    with pytest.raises(ServiceError):
        server.service.acting_for(server.config.principal).notes_search(
            None, token[:2] + "*", None, None, None
        )


# --- listing -------------------------------------------------------------------------------


def test_a_cursor_stays_valid_while_notes_are_added_and_removed(
    server: Server, vault: Path
) -> None:
    svc = server.service.acting_for(server.config.principal)
    first = svc.notes_list(None, None, None, None, 2)
    assert [n.path for n in first.notes] == ["inbox.md", "journal/2026-11-28.md"]
    (vault / "aaa.md").write_text("# before the cursor\n")  # sorts before: never shown now
    (vault / "projects" / "budget.md").unlink()  # after the cursor: simply gone
    (vault / "projects" / "new.md").write_text("# new\n")
    rest = svc.notes_list(None, None, None, first.nextCursor, 10)
    assert [n.path for n in rest.notes] == [
        "projects/new.md",
        "projects/plan.md",
        "readme.txt",
    ]


def test_a_tag_filter_matches_nested_tags_and_case(server: Server) -> None:
    svc = server.service.acting_for(server.config.principal)
    listed = [n.path for n in svc.notes_list(None, None, "WORK", None, None).notes]
    assert listed == ["projects/budget.md", "projects/plan.md"]
    nested = [n.path for n in svc.notes_list(None, None, "#work/money", None, None).notes]
    assert nested == ["projects/budget.md"]
    assert svc.notes_list(None, None, "wor", None, None).notes == []


@pytest.mark.parametrize("rare_below", [2_000, 0])
def test_a_tag_on_few_or_many_notes_lists_the_same_pages(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch, rare_below: int
) -> None:
    import fsnotes.notes.index.reads as index

    monkeypatch.setattr(index, "RARE_TAG_NOTES", rare_below)  # 0: every tag is "common"
    for i in range(7):
        (vault / f"t{i}.md").write_text(f"# t{i}\n\n#work/sub{i % 2}\n")
    svc = server.service.acting_for(server.config.principal)
    pages, cursor = [], None
    while True:
        page = svc.notes_list(None, None, "work", cursor, 3)
        pages.append([n.path for n in page.notes])
        cursor = page.nextCursor
        if cursor is None:
            break
    assert pages == [
        ["projects/budget.md", "projects/plan.md", "t0.md"],
        ["t1.md", "t2.md", "t3.md"],
        ["t4.md", "t5.md", "t6.md"],
    ]


def test_results_say_how_complete_the_index_is(server: Server) -> None:
    page = server.service.acting_for(server.config.principal).notes_list(
        None, None, None, None, None
    )
    assert page.index.model_dump(exclude_none=True) == {
        "complete": True,
        "indexedNotes": 5,
        "skippedFolders": 0,
    }


# --- freshness -------------------------------------------------------------------------------


def test_a_rescan_reads_only_what_changed(server: Server, vault: Path) -> None:
    catalog = catalog_of(server)
    first = catalog.rescan()
    assert first is not None and first.indexed == 5
    (vault / "inbox.md").write_text("# Inbox\n\nchanged\n")
    again = catalog.rescan()
    assert again is not None and (again.indexed, again.removed) == (1, 0)
    (vault / "readme.txt").unlink()
    assert (catalog.rescan() or first).removed == 1


def test_a_note_created_in_a_new_folder_during_a_scan_stays_in_the_index(
    server: Server, vault: Path
) -> None:
    # Seen once in a full run (tests/e2e/test_notes_sdk.py): the first build listed the
    # workspace, a notes_create made new/idea.md and indexed it, then the build's end dropped
    # every indexed folder it had not listed ("1 removed"), new/ included: the note was missing
    # from listings and resources until the next rescan.
    svc = server.service.acting_for(server.config.principal)
    catalog = catalog_of(server)
    created: list[str] = []

    def between_the_passes(done: int, total: int) -> None:
        if not created:
            created.append(svc.notes_create(None, "new/idea.md", "# Idea\n\nkettle\n").path)

    report = catalog.rescan(progress=between_the_passes)
    assert report is not None and created == ["new/idea.md"]
    assert report.removed == 0
    assert catalog.index.get(("new", "idea.md")) is not None
    listed = svc.notes_list(None, None, None, None, None)
    assert "new/idea.md" in [str(n.path) for n in listed.notes]  # type: ignore[attr-defined]
    # A folder that really went away is still dropped by the next scan.
    (vault / "new" / "idea.md").unlink()
    (vault / "new").rmdir()
    again = catalog.rescan()
    assert again is not None and again.removed == 1
    assert catalog.index.get(("new", "idea.md")) is None


def test_an_interrupted_build_resumes_where_its_last_batch_ended(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsnotes.notes.index.scan as scan

    monkeypatch.setattr(scan, "BATCH", 10)
    for i in range(95):
        (vault / "many").mkdir(exist_ok=True)
        (vault / "many" / f"n{i:03}.md").write_text(f"# n{i}\n")
    catalog = catalog_of(server)
    stopped = catalog.rescan(stop=lambda: catalog.index.count() >= 30)
    assert stopped is not None and stopped.cancelled and 0 < stopped.indexed < 100
    resumed = catalog.rescan()
    assert resumed is not None and not resumed.cancelled
    assert stopped.indexed + resumed.indexed == 100  # nothing read twice
    assert catalog.status().complete


def test_a_file_that_is_not_a_note_is_not_read_again_until_it_changes(
    server: Server, vault: Path
) -> None:
    (vault / "latin1.md").write_bytes(b"# caf\xe9\n")
    catalog = catalog_of(server)
    assert (catalog.rescan() or catalog).rejected == 1  # type: ignore[union-attr]
    again = catalog.rescan()
    assert again is not None and again.rejected == 0 and again.indexed == 0
    (vault / "latin1.md").write_text("# café\n")
    fixed = catalog.rescan()
    assert fixed is not None and fixed.indexed == 1
    assert paths(
        server.service.acting_for(server.config.principal).notes_search(
            None, "cafe", None, None, None
        )
    ) == ["latin1.md"]


def test_a_folder_too_deep_for_any_uri_is_skipped_and_counted(server: Server, vault: Path) -> None:
    deep = vault.joinpath(*["d"] * 130)
    deep.mkdir(parents=True)
    (deep / "lost.md").write_text("# unreachable plan\n")
    ok = vault.joinpath(*["d"] * 127)
    (ok / "kept.md").write_text("# deep plan\n")
    svc = server.service.acting_for(server.config.principal)
    found = svc.notes_search(None, "deep", None, None, None)
    assert paths(found) == ["/".join(["d"] * 127 + ["kept.md"])]
    assert found.index.skippedFolders == 1  # type: ignore[index]
    assert "too many entries" in found.index.message  # type: ignore[index]


def test_our_leftovers_are_swept_by_the_scan(server: Server, vault: Path) -> None:
    leftover = vault / "projects" / ".fsnotes-tmp-0123456789abcdef"
    leftover.write_text("a copy of a note a killed write left")
    catalog_of(server).rescan()
    assert not leftover.exists()


# --- the file itself -------------------------------------------------------------------------


def _index_file(state: Path) -> Path:
    [path] = (state / "index").glob("ws-*.sqlite3")
    return path


@pytest.mark.parametrize("damage", ["junk", "truncate", "schema", "empty"])
def test_a_damaged_or_outdated_index_is_rebuilt_and_logged(
    vault: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    cfg = load(workspaces=[str(vault)], state_dir=str(state), principal="ada", env={})
    first = build(cfg)
    assert (
        len(
            paths(
                first.service.acting_for(first.config.principal).notes_search(
                    None, "plan", None, None, None
                )
            )
        )
        == 4
    )
    first.close()
    path = _index_file(state)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if damage == "junk":
        path.write_bytes(b"this is not a database" * 100)
    elif damage == "truncate":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        db = sqlite3.connect(path)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
        db.close()
    caplog.set_level(logging.WARNING, logger="fsnotes.index")
    again = build(cfg)
    try:
        found = again.service.acting_for(again.config.principal).notes_search(
            None, "plan", None, None, None
        )
        if damage == "truncate" and not found.results:
            # A truncation SQLite only notices when a query reads the lost pages: that
            # query says the index is being rebuilt; the next one is complete again.
            found = again.service.acting_for(again.config.principal).notes_search(
                None, "plan", None, None, None
            )
        assert len(paths(found)) == 4
    except ServiceError as exc:
        assert "rebuilt" in str(exc)
        found = again.service.acting_for(again.config.principal).notes_search(
            None, "plan", None, None, None
        )
        assert len(paths(found)) == 4
    finally:
        again.close()
    if damage != "empty":
        assert any("rebuilding" in r.getMessage() for r in caplog.records)


def test_an_index_follows_the_workspace_directory_not_its_path(vault: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = build(load(workspaces=[str(vault)], state_dir=str(state), principal="a", env={}))
    first.service.acting_for(first.config.principal).notes_list(None, None, None, None, None)
    first.close()
    moved = tmp_path / "renamed"
    vault.rename(moved)
    second = build(load(workspaces=[str(moved)], state_dir=str(state), principal="a", env={}))
    try:
        second.service.acting_for(second.config.principal).notes_list(None, None, None, None, None)
    finally:
        second.close()
    assert len(list((state / "index").glob("ws-*.sqlite3"))) == 1
    other = tmp_path / "notes"
    other.mkdir()  # a new directory at the old path: its own, empty index
    third = build(load(workspaces=[str(other)], state_dir=str(state), principal="a", env={}))
    try:
        assert (
            third.service.acting_for(third.config.principal)
            .notes_list(None, None, None, None, None)
            .notes
            == []
        )
    finally:
        third.close()
    assert len(list((state / "index").glob("ws-*.sqlite3"))) == 2


def test_index_files_are_private(server: Server, tmp_path: Path) -> None:
    server.service.acting_for(server.config.principal).notes_list(None, None, None, None, None)
    folder = tmp_path / "state" / "index"
    assert folder.stat().st_mode & 0o777 == 0o700
    for entry in folder.iterdir():
        assert entry.stat().st_mode & 0o777 == 0o600, entry.name


def test_other_extensions_mean_another_index(vault: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert fingerprint([".md"]) != fingerprint([".md", ".txt"])
    root_id = os.stat(vault)
    from sandbox.root import FileIdentity

    identity = FileIdentity(root_id.st_dev, root_id.st_ino)
    one = NoteIndex.open(state, identity, fingerprint([".md"]))
    one.set_meta({"complete": "1"})
    one.close()
    two = NoteIndex.open(state, identity, fingerprint([".md", ".txt"]))
    try:
        assert two.get_meta("complete") == "0"  # replaced: built for other extensions
    finally:
        two.close()
