"""A full build writes exactly what writing the same notes one at a time writes.

A build takes shortcuts (whole batches per statement, FTS5 merging paused, see
fsnotes.notes.index.noteindex); these tests build one vault twice, once as a build and once note by
note (batches of one, the path every single write of the server takes), and compare every
row of every table, the full-text index term by term, and search answers.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fsnotes.notes.index.newnotes as newnotes
import fsnotes.notes.index.noteindex as indexmod
import fsnotes.notes.index.scan as scan
import fsnotes.notes.index.schema as schemamod
from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.index.catalog import Catalog
from fsnotes.notes.index.db import sqlite as sqlite3  # the index's SQLite (3.43+)

# Every kind of thing a note gives the index: frontmatter (lists, quoted values, escapes),
# titles from frontmatter, headings or the file name, inline and nested tags in any case,
# every link kind, code that hides tags, non-ASCII text, and empty and NUL-bearing notes.
NOTES = {
    "inbox.md": "# Inbox\n\nBuy milk #todo #Todo #todo/Urgent\nCall [[Plumber|the plumber]]\n",
    "plain.txt": "No heading, no tags; just words about a copper kettle.\n",
    "empty.md": "",
    "front.md": (
        '---\ntitle: "Quoted \\"title\\""\ntags: [work, "home/garden"]\ndate: 2026-12-01\n'
        "status: draft\nrank: 3\nok: yes\nlist:\n  - one\n  - two\n---\n"
        "# Not the title\n\n## Second level\n\nBody with ![[pic.png]] and [md](other.md#x).\n"
    ),
    "code.md": "# Code\n\n```\n#notatag [[notalink]]\n```\nInline `#nope` but #yes.\n",
    "unicode/café.md": "# Café Ünïcødé\n\nÉtude über Straße — naïve #Ärger 😀 [[Ziel]]\n",
    "deep/a/b/c/note.md": "---\ntags: deep, deeper\n---\nSee [[../up]] and [up](../../x.md).\n",
    "nul.md": "# Has a NUL\n\nbefore\x00after #nultag [[Target]]\n",
    "nulfront.md": '---\ntitle: "a\\u0000b"\n---\nbody\n',
    "dup.md": "# Dup\n\n[[A]] [[A]] [[a]] ![[A]] #x #X #x/y\n",
}
BUILT_NOTES = 300  # notes of the compaction test: enough segments to merge
MANY = 40  # notes in one folder, so that batches of several notes are written


def _vault(root: Path) -> None:
    for rel, text in NOTES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    (root / "many").mkdir()
    for i in range(MANY):
        (root / "many" / f"n{i:02}.md").write_text(
            f"---\ntags: [t{i % 7}]\nwho: p{i % 3}\n---\n# Note {i}\n\nword{i} common "
            f"#many/t{i % 5} [[n{(i + 1) % MANY:02}]]\n"
        )


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    _vault(root)
    return root


@pytest.fixture
def servers(vault: Path, tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    made = []
    for name in ("built", "one-by-one"):
        cfg = load(workspaces=[str(vault)], state_dir=str(tmp_path / name), principal="ada", env={})
        made.append(build(cfg))
    yield made[0], made[1]
    for srv in made:
        srv.close()


def _catalog(server: Server) -> Catalog:
    svc = server.service.acting_for(server.config.principal)
    ws = server.service.grants.all_workspaces()[0]
    return svc.catalogs.of(ws, svc.stores[ws.name])


def _dump(catalog: Catalog) -> dict[str, list[tuple[object, ...]]]:
    """Every row the index holds (but the scan's bookkeeping in ``meta``), and every
    (term, note, column, offset) of both full-text tables."""
    conn = sqlite3.connect(catalog.index.path)
    try:
        out: dict[str, list[tuple[object, ...]]] = {}
        for table in ("notes", "tags", "links", "front", "rejects", "attachments"):
            out[table] = sorted(conn.execute(f"SELECT * FROM {table}"), key=repr)
        out["meta"] = sorted(conn.execute("SELECT * FROM meta WHERE key IN ('notes')"))
        for table in ("fts", "tfts"):
            out[table] = sorted(conn.execute(f"SELECT rowid, * FROM {table}"), key=repr)
            conn.execute(
                f"CREATE VIRTUAL TABLE temp.v_{table} USING fts5vocab(main, {table}, instance)"
            )
            out[f"{table}_terms"] = sorted(conn.execute(f"SELECT * FROM temp.v_{table}"), key=repr)
        return out
    finally:
        conn.close()


def _build_both(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch, chunk: int | None = None
) -> tuple[Catalog, Catalog]:
    built, single = (_catalog(s) for s in servers)
    with monkeypatch.context() as m:
        m.setattr(indexmod, "BUILD_NOTES", 1)  # a build's merge settings, however small
        if chunk is not None:  # the other tables' rows in several statements
            m.setattr(newnotes, "MAX_CHUNK", chunk)
        report = built.rescan()
    assert report is not None and report.indexed == len(NOTES) + MANY
    with monkeypatch.context() as m:
        m.setattr(scan, "BATCH", 1)  # one note per upsert: the row-by-row path
        again = single.rescan()
    assert again is not None and again.indexed == len(NOTES) + MANY
    return built, single


def test_a_build_holds_the_same_rows_and_terms_as_note_by_note_writes(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    built, single = _build_both(servers, monkeypatch)
    got, want = _dump(built), _dump(single)
    assert got["notes"], "nothing was indexed"
    nul = {r[0] for r in want["notes"] if r[1] == "nul.md"}
    words = {r[0] for r in want["fts_terms"] if r[1] in nul}
    assert {"befor", "after", "nultag"} <= words, "the note with a NUL was not indexed whole"
    for table in want:
        assert got[table] == want[table], table


def test_a_build_writing_a_tables_rows_in_several_statements_holds_the_same_rows(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    built, single = _build_both(servers, monkeypatch, chunk=4)  # 40 rows: ten statements
    assert _dump(built) == _dump(single)


def test_a_tables_rows_are_cut_into_statements_the_full_text_ones_never() -> None:
    assert newnotes.chunks("links", 0) == []
    assert newnotes.chunks("links", 1) == [1]
    assert newnotes.chunks("links", 1000) == [512, 256, 128, 64, 32, 8]
    big = newnotes.MAX_CHUNK * 2 + 3
    assert newnotes.chunks("tags", big) == [newnotes.MAX_CHUNK] * 2 + [2, 1]
    assert newnotes.chunks("fts", 1000) == [1000]
    # A whole batch of notes fits one statement of each full-text table.
    assert newnotes.chunks("fts", scan.BATCH) == [scan.BATCH]
    with pytest.raises(ValueError, match="do not fit one statement"):
        newnotes.chunks("fts", newnotes.rows_per_statement("fts") + 1)
    sql = newnotes.values_insert("tags", 2)
    assert sql.endswith("VALUES (?2, ?1 + ?3), (?4, ?1 + ?5)")
    for rows in (0, newnotes.rows_per_statement("tags") + 1):
        with pytest.raises(ValueError, match="rows in one statement"):
            newnotes.values_insert("tags", rows)


def test_a_whole_batch_fits_one_statement_of_the_index_s_sqlite() -> None:
    """The full-text tables take a batch in one statement: BATCH rows of their width must be
    within the parameters the index's SQLite (sqlean's build) accepts."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE TABLE fts(rowid, {', '.join(schemamod.FTS_COLUMNS)})")
        width = len(schemamod.FTS_COLUMNS) + 1
        values: list[object] = [0, *([1] + ["x"] * (width - 1)) * scan.BATCH]
        for at in range(scan.BATCH):
            values[1 + at * width] = at + 1
        conn.execute(newnotes.values_insert("fts", scan.BATCH), values)
        assert conn.execute("SELECT count(*), max(rowid) FROM fts").fetchone() == (
            scan.BATCH,
            scan.BATCH,
        )
    finally:
        conn.close()


def test_a_build_answers_searches_and_listings_as_note_by_note_writes(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    _build_both(servers, monkeypatch)
    answers = []
    for srv in servers:
        svc = srv.service.acting_for(srv.config.principal)
        seen = []
        for query in ("common", "kettle", "café", "word1*", '"copper kettle"', "NUL", "after"):
            found = svc.notes_search(None, query, None, None, None)
            seen.append([h.model_dump() for h in found.results])
        for tag in ("todo", "many", "home", "deep", "Ärger", "nultag"):
            listed = svc.notes_list(None, None, tag, None, None)
            seen.append([n.model_dump() for n in listed.notes])
        answers.append(seen)
    assert answers[0] == answers[1]
    assert all(answers[0][:3]), answers[0]


def test_a_build_batch_with_a_nul_is_written_in_bulk(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values are bound, never spliced into text that a NUL would end: a batch holding one
    is written in bulk like any other, the same as note by note."""
    batches: list[list[str]] = []
    original = indexmod.NoteIndex._insert_many

    def spy(tx: object, batch: newnotes.NewNotes) -> None:
        batches.append([parts[-1] for parts in batch.parts])
        original(tx, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(indexmod.NoteIndex, "_insert_many", staticmethod(spy))
    built, single = _build_both(servers, monkeypatch)
    assert any("nul.md" in names and "nulfront.md" in names for names in batches), batches
    assert _dump(built) == _dump(single)


# FTS5's file format: a segment page's rowid in ``<table>_data`` holds the segment's id above
# its page number (31 bits), tree height (5) and doclist-index flag (1); rows below hold
# the averages (1) and the structure record (10).
_SEGMENT_SHIFT = 31 + 5 + 1


def _segments(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(
            conn.execute(
                f"SELECT count(DISTINCT id >> {_SEGMENT_SHIFT}) FROM {table}_data WHERE id >= ?",
                (1 << _SEGMENT_SHIFT,),
            ).fetchone()[0]
        )
    finally:
        conn.close()


def test_each_batch_of_a_build_adds_one_segment_to_each_full_text_table(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's words reach FTS5's segments once, at its commit: not once per statement
    (SQLite's statement savepoints make FTS5 write what it holds in memory), which made a
    segment per statement that the merges then read and wrote again."""
    catalog = _catalog(servers[0])
    after: list[tuple[bool, int, int]] = []
    upsert = indexmod.NoteIndex.upsert

    def counting(self: indexmod.NoteIndex, docs: Any, **kwargs: Any) -> int:
        written = upsert(self, docs, **kwargs)
        bulk = isinstance(docs, newnotes.NewNotes)
        after.append((bulk, _segments(self.path, "fts"), _segments(self.path, "tfts")))
        return written

    with monkeypatch.context() as m:
        m.setattr(indexmod, "BUILD_NOTES", 1)  # a build's merge settings: no merging
        m.setattr(newnotes, "MAX_CHUNK", 4)  # the other tables in several statements
        m.setattr(indexmod.NoteIndex, "upsert", counting)
        report = catalog.rescan()
    assert report is not None and report.indexed == len(NOTES) + MANY
    assert any(bulk for bulk, _fts, _tfts in after), "no batch was written in bulk"
    assert [(fts, tfts) for _bulk, fts, tfts in after] == [(n, n) for n in range(1, len(after) + 1)]
    assert _segments(catalog.index.path, "fts") == 1  # the final merge: one segment


def _indexes(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        return {str(r[0]) for r in rows}
    finally:
        conn.close()


def test_a_build_makes_its_deferred_indexes_at_its_end_and_they_answer_lookups(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    built, single = (_catalog(s) for s in servers)
    deferred = set(schemamod.DEFERRED_INDEXES)
    during: list[set[str]] = []
    upsert = indexmod.NoteIndex.upsert

    def watching(self: indexmod.NoteIndex, docs: Any, **kwargs: Any) -> int:
        during.append(_indexes(self.path) & deferred)
        return upsert(self, docs, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(indexmod, "BUILD_NOTES", 1)
        m.setattr(indexmod.NoteIndex, "upsert", watching)
        assert built.rescan() is not None
    assert during and all(not names for names in during), during  # kept out while it wrote
    assert deferred <= _indexes(built.index.path)  # and made at its end
    assert single.rescan() is not None  # a scan too small to be a build keeps them
    assert deferred <= _indexes(single.index.path)
    # What they serve, answered the same by both: a note's stem and a link's target.
    for catalog in (built, single):
        conn = sqlite3.connect(catalog.index.path)
        try:
            plan = " ".join(
                str(r[-1])
                for sql in (
                    "SELECT id FROM notes WHERE stem_fold = 'n1'",
                    "SELECT note FROM links WHERE leaf = 'n1'",
                )
                for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}")
            )
        finally:
            conn.close()
        assert "notes_stem" in plan and "links_leaf" in plan, plan


def _merge_settings(catalog: Catalog) -> dict[str, dict[str, object]]:
    conn = sqlite3.connect(catalog.index.path)
    try:
        return {t: dict(conn.execute(f"SELECT k, v FROM {t}_config")) for t in ("fts", "tfts")}
    finally:
        conn.close()


def test_a_build_names_each_window_of_notes_to_the_kernel_before_reading_them(
    servers: tuple[Server, Server], vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build reads a folder's notes with Root.read_many: each window of them is opened
    and hinted to the kernel before the first is read, so that reads from a cold disk
    overlap, and each note is opened once. A note removed after the listing fails only its
    own open: the build drops it and fails nothing."""
    import sandbox.root as rootmod
    from sandbox._resolve import read_fd

    monkeypatch.setattr(rootmod, "READ_MANY_WINDOW", 8)
    catalog = _catalog(servers[0])
    events: list[tuple[str, str]] = []
    advise, open_regular = rootmod._advise_willneed, rootmod.Root._open_regular

    def opening(self: Any, parts: tuple[str, ...], op: str) -> Any:
        events.append(("open", "/".join(parts)))
        if parts == ("many", "n01.md"):
            (vault / "many" / "n12.md").unlink()  # in the next window: not opened yet
        return open_regular(self, parts, op)

    def hinting(fd: int, st: Any) -> None:
        events.append(("hint", events[-1][1]))  # the file opened just before
        advise(fd, st)

    def reading(fd: int, st: Any, max_bytes: int, parts: tuple[str, ...]) -> bytes:
        events.append(("read", "/".join(parts)))
        return read_fd(fd, st, max_bytes, parts)

    monkeypatch.setattr(rootmod.Root, "_open_regular", opening)
    monkeypatch.setattr(rootmod, "_advise_willneed", hinting)
    monkeypatch.setattr(rootmod, "read_fd", reading)
    report = catalog.rescan()
    assert report is not None and report.indexed == len(NOTES) + MANY - 1
    assert catalog.index.get(("many", "n12.md")) is None
    assert catalog.index.get(("many", "n13.md")) is not None
    many = [(kind, path) for kind, path in events if path.startswith("many/")]
    opens = [path for kind, path in many if kind == "open"]
    assert sorted(opens) == [f"many/n{i:02}.md" for i in range(MANY)]  # once each
    # Within each window: every open (and hint) before the first read.
    first_window = many[: many.index(next(e for e in many if e[0] == "read"))]
    assert [kind for kind, _ in first_window] == ["open", "hint"] * 8


def test_a_build_checkpoints_its_wal_less_often_then_as_before(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build's commits copy the WAL into the file every BUILD_WAL_AUTOCHECKPOINT_PAGES,
    not at SQLite's default of every 1,000 pages; afterwards the default is back."""
    catalog = _catalog(servers[0])
    during: list[int] = []
    upsert = indexmod.NoteIndex.upsert

    def watching(self: indexmod.NoteIndex, docs: Any, **kwargs: Any) -> int:
        with self._conns.using() as conn:
            during.append(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        return upsert(self, docs, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(indexmod, "BUILD_NOTES", 1)
        m.setattr(indexmod.NoteIndex, "upsert", watching)
        assert catalog.rescan() is not None
    assert during and set(during) == {indexmod.BUILD_WAL_AUTOCHECKPOINT_PAGES}, during
    with catalog.index._conns.using() as conn:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000


def test_merge_settings_and_indexes_a_killed_build_left_are_put_back_by_the_next_scan(
    servers: tuple[Server, Server],
) -> None:
    catalog = _catalog(servers[0])
    assert catalog.rescan() is not None
    after_scan = _merge_settings(catalog)
    assert after_scan["fts"]["crisismerge"] == indexmod.FTS_CRISISMERGE
    # What a build killed before its end leaves (the settings live in the file).
    conn = sqlite3.connect(catalog.index.path)
    try:
        indexmod.NoteIndex._merging(conn, building=True)
        conn.commit()
    finally:
        conn.close()
    conn = sqlite3.connect(catalog.index.path)
    try:
        indexmod.NoteIndex._deferred(conn, building=True)
    finally:
        conn.close()
    assert _merge_settings(catalog)["fts"]["hashsize"] == indexmod.BUILD_HASHSIZE
    assert not set(schemamod.DEFERRED_INDEXES) & _indexes(catalog.index.path)
    assert catalog.rescan() is not None  # nothing changed: not a build
    assert _merge_settings(catalog) == after_scan
    assert set(schemamod.DEFERRED_INDEXES) <= _indexes(catalog.index.path)


def test_a_build_with_files_no_uri_can_name_reports_progress_up_to_its_total(
    servers: tuple[Server, Server], vault: Path
) -> None:
    # Note-named files a URI cannot hold (a backslash, a control character): counted by
    # the first pass, skipped by the second, never indexed.
    (vault / "back\\slash.md").write_text("# not listable\n")
    (vault / "many" / "ctl\x01.md").write_text("# not listable\n")
    catalog = _catalog(servers[0])
    seen: list[tuple[int, int]] = []
    report = catalog.rescan(progress=lambda done, total: seen.append((done, total)))
    assert report is not None and report.indexed == len(NOTES) + MANY
    assert seen[-1] == (len(NOTES) + MANY + 2, len(NOTES) + MANY + 2)
    assert [done for done, _total in seen] == sorted(done for done, _total in seen)
    assert catalog.index.count() == len(NOTES) + MANY
    assert catalog.status().complete


def test_a_build_gives_back_the_pages_its_final_merge_freed_and_empties_its_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final merge rewrites the full-text index and frees the segments it merged: the
    file keeps next to no free pages and the WAL is cut back after it (a server does not
    carry a WAL the size of the whole index for as long as it runs)."""
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(BUILT_NOTES):
        words = " ".join(f"w{(i * 7 + k) % 997}" for k in range(120))
        (root / f"n{i:03}.md").write_text(f"# Note {i}\n\n{words}\n")
    cfg = load(workspaces=[str(root)], state_dir=str(tmp_path / "state"), principal="ada", env={})
    srv = build(cfg)
    try:
        catalog = _catalog(srv)
        with monkeypatch.context() as m:
            m.setattr(indexmod, "BUILD_NOTES", 1)
            m.setattr(scan, "BATCH", 10)  # a segment per batch: the merge frees them all
            report = catalog.rescan()
        assert report is not None and report.indexed == BUILT_NOTES
        conn = sqlite3.connect(catalog.index.path)
        try:
            assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            page = conn.execute("PRAGMA page_size").fetchone()[0]
        finally:
            conn.close()
        # The writes after the merge (the scan's bookkeeping) may free a page or two.
        assert free <= pages // 50, (free, pages)
        wal = catalog.index.path.with_name(catalog.index.path.name + "-wal")
        # Cut back at the merge; the bookkeeping after it writes a few pages again.
        assert not wal.exists() or wal.stat().st_size <= 8 * page, wal.stat().st_size
        found = srv.service.acting_for("ada").notes_search(None, "w5", None, None, None)
        assert found.results
    finally:
        srv.close()


def test_the_index_keeps_the_words_not_the_text_and_a_replaced_notes_words_leave_it(
    servers: tuple[Server, Server], vault: Path
) -> None:
    """The index keeps the words of a note and not its text (contentless FTS tables, no
    other table of text, no sentence of a note anywhere in the file or its WAL); a note
    replaced or removed takes its old words out of both FTS tables (contentless_delete),
    which FTS5's own integrity check confirms."""
    catalog = _catalog(servers[0])
    catalog.rescan()
    note = vault / "swap.md"
    note.write_text("# Swap\n\nquokka marsupial\n")
    catalog.refresh(("swap.md",))
    note.write_text("# Swap\n\nwombat burrow near the old copper kettle\n")
    catalog.refresh(("swap.md",))
    conn = sqlite3.connect(catalog.index.path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert not {"fts_content", "tfts_content", "texts"} & tables
        assert "fts_docsize" in tables  # the column lengths the ranking reads
        body = conn.execute(
            "SELECT f.body FROM fts f JOIN notes n ON n.id = f.rowid WHERE n.key = 'swap.md'"
        ).fetchone()
        assert body == (None,)  # contentless: a column reads as NULL
        held = b"".join(
            p.read_bytes() for p in Path(catalog.index.path).parent.iterdir() if p.is_file()
        )
        assert b"near the old copper kettle" not in held
        assert b"Buy milk" not in held  # inbox.md's body (its title is kept in ``notes``)
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, fts, row)")
        terms = {r[0] for r in conn.execute("SELECT term FROM temp.v")}
        assert "wombat" in terms and "quokka" not in terms
        assert conn.execute("SELECT count(*) FROM tfts WHERE tfts MATCH 'swap'").fetchone()[0] == 1
        note.unlink()
        catalog.refresh(("swap.md",))
        terms = {r[0] for r in conn.execute("SELECT term FROM temp.v")}
        assert "wombat" not in terms
        assert conn.execute("SELECT count(*) FROM tfts WHERE tfts MATCH 'swap'").fetchone()[0] == 0
        for table in ("fts", "tfts"):
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def test_a_build_hands_the_interpreter_lock_over_quickly_and_puts_the_setting_back(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a build's reader and writer run, the switch interval is the build's (so the
    writer gets the lock back soon after each SQLite statement); afterwards it is what it
    was, and a build ended by an error puts it back too."""
    catalog = _catalog(servers[0])
    before = sys.getswitchinterval()
    assert before > scan.BUILD_SWITCH_INTERVAL_S
    seen: list[float] = []
    upsert = indexmod.NoteIndex.upsert

    def watching(self: indexmod.NoteIndex, *args: Any, **kwargs: Any) -> int:
        seen.append(sys.getswitchinterval())
        return upsert(self, *args, **kwargs)

    monkeypatch.setattr(indexmod.NoteIndex, "upsert", watching)
    assert catalog.rescan() is not None
    assert seen and set(seen) == {scan.BUILD_SWITCH_INTERVAL_S}
    assert sys.getswitchinterval() == before

    def failing(self: indexmod.NoteIndex, *args: Any, **kwargs: Any) -> int:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(indexmod.NoteIndex, "upsert", failing)
    catalog.index.recreate()
    with pytest.raises(RuntimeError):
        catalog.scanner.scan()
    assert sys.getswitchinterval() == before


def test_builds_at_once_share_the_switch_interval_and_the_last_puts_it_back() -> None:
    before = sys.getswitchinterval()
    first = scan._quick_switching()
    second = scan._quick_switching()
    first.__enter__()
    second.__enter__()
    assert sys.getswitchinterval() == scan.BUILD_SWITCH_INTERVAL_S
    first.__exit__(None, None, None)
    assert sys.getswitchinterval() == scan.BUILD_SWITCH_INTERVAL_S  # the other still runs
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == before
