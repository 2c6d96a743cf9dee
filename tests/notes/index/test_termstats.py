"""The statistics the ranking scores from (fsnotes/notes/index/termstats.py) equal a count
made from each note's own columns.

Each note's column text is made again from its file, as the indexer makes it (the index
keeps no text), and tokenized; the oracle counts
a word's, a phrase's and a prefix's occurrences per column, each column's tokens, and their
averages, and the statistics read from fts5vocab, fts_docsize and FTS5's averages record
must be those counts. Long bodies make the lengths and totals multi-byte varints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from fsnotes.app.server import Server
from fsnotes.notes.index import termstats
from fsnotes.notes.index.newnotes import side_rows
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import FTS_COLUMNS, TEXT_COLUMNS, Document, parts_of
from tests.notes.index.test_catalog import catalog_of

NOTES = {
    "kettle.md": "# Copper kettle\n\nThe copper kettle boils. A kettle, copper-bottomed.\n",
    "garden/shed.md": "---\ntags: [garden]\n---\n# Shed\n\n" + "Timber and paint, the shed. " * 60,
    "plans.md": "# Plans\n\n## Planning the roof\n\nWe planned plans; the plan is a copper roof.\n",
    "empty.md": "",
}


def indexed(server: Server, vault: Path) -> NoteIndex:
    for rel, text in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    server.service.acting_for(server.config.principal).notes_search(None, "kettle", None, None, 5)
    return catalog_of(server).index


def columns(server: Server, index: NoteIndex) -> dict[int, list[list[str]]]:
    """Each note's tokens per text column, from the row the indexer makes of its file."""
    store = catalog_of(server).store
    out = {}
    for note_id, key in index.query("SELECT id, key FROM notes"):
        note = store.read(parts_of(key))
        doc = Document(note.parts, note.info, note.etag, note.meta)
        (row,) = side_rows(note_id, doc, server.config.extensions)["fts"]
        values = dict(zip(("id", *FTS_COLUMNS), row, strict=True))
        out[int(note_id)] = [termstats.tokens(str(values[c] or "")) for c in TEXT_COLUMNS]
    return out


def oracle(
    cols: dict[int, list[list[str]]], words: list[str], prefix: bool
) -> set[tuple[int, int, int]]:
    out = set()
    for note, per_column in cols.items():
        for at, toks in enumerate(per_column):
            count = 0
            for start in range(len(toks) - len(words) + 1):
                window = toks[start : start + len(words)]
                *head, last = window
                if head == words[:-1] and (
                    last.startswith(words[-1]) if prefix else last == words[-1]
                ):
                    count += 1
            if count:
                out.add((note, at, count))
    return out


def test_frequencies_of_words_phrases_and_prefixes_equal_a_count(
    server: Server, vault: Path
) -> None:
    index = indexed(server, vault)
    cols = columns(server, index)
    everyone = set(cols)
    for text, prefix in [
        ("kettle", False),
        ("copper", False),
        ("planned", False),  # the stem 'plan' of plans, planning, planned
        ("copper kettle", False),
        ("the shed", False),
        ("pla", True),
        ("copper ket", True),
        ("zebra", False),
    ]:
        words = termstats.tokens(text)
        expr = f'"{text}"' + "*" * prefix
        found = set(termstats.frequencies(index, expr, words, prefix, everyone))
        expected = oracle(cols, words, prefix)
        if len(words) > 1:  # a phrase counts once per column it is in
            expected = {(n, at, 1) for n, at, _c in expected}
        assert found == expected, text
    some = {min(everyone)}
    words = termstats.tokens("copper")
    assert {r[0] for r in termstats.frequencies(index, '"copper"', words, False, some)} <= some


def test_several_words_read_at_once_equal_a_count(server: Server, vault: Path) -> None:
    index = indexed(server, vault)
    cols = columns(server, index)
    everyone = set(cols)
    words = [termstats.tokens(w)[0] for w in ("kettle", "copper", "planned", "shed", "zebra")]
    for within in (everyone, {min(everyone)}):
        found = termstats.word_frequencies(index, [*words, words[0]], within)
        for word in words:
            expected = {r for r in oracle(cols, [word], False) if r[0] in within}
            assert set(found.get(word, [])) == expected, word
    assert termstats.word_frequencies(index, [], everyone) == {}


def test_lengths_and_averages_equal_the_token_counts(server: Server, vault: Path) -> None:
    index = indexed(server, vault)
    cols = columns(server, index)
    lengths = termstats.lengths(index, cols)
    assert lengths == {note: tuple(len(t) for t in per) for note, per in cols.items()}
    assert max(n for per in lengths.values() for n in per) > 127  # a multi-byte varint
    notes, averages = termstats.averages(index)
    assert notes == len(cols)
    for at in range(len(TEXT_COLUMNS)):
        expected = sum(per[at] for per in lengths.values()) / notes
        assert abs(averages[at] - expected) < 1e-9


def test_a_feedback_word_in_too_many_notes_is_not_read(server: Server, vault: Path) -> None:
    index = indexed(server, vault)
    cols = columns(server, index)
    among = sorted(cols)
    [copper] = termstats.tokens("copper")
    held = {n for n, per in cols.items() if any(copper in t for t in per)}
    assert termstats.held(index, copper, len(held)) == len(held)
    rows = termstats.word_frequencies(index, [copper], set(among))[copper]
    assert set(rows) == oracle(cols, [copper], False)
    assert termstats.held(index, copper, len(held) - 1) is None
    assert termstats.held(index, "nosuchwordanywhere", len(cols)) is None


def test_a_feedback_words_count_is_remembered_until_the_index_changes(
    server: Server, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = indexed(server, vault)
    [copper] = termstats.tokens("copper")
    first = termstats.held(index, copper, 100)
    assert first is not None
    counted: list[str] = []
    query = index.query

    def spy(sql: str, params: Sequence[object] = ()) -> list[object]:
        if "count(*)" in sql:
            counted.append(sql)
        return query(sql, params)

    monkeypatch.setattr(index, "query", spy)
    assert termstats.held(index, copper, 100) == first
    assert counted == []  # remembered: no count read again
    (vault / "more.md").write_text("# More\n\nAnother copper pot.\n", encoding="utf-8")
    server.service.acting_for(server.config.principal).notes_search(None, "pot", None, None, 5)
    assert termstats.held(index, copper, 100) == first + 1
    assert counted, "the index changed: the count must be read again"


def test_counts_in_one_round_trip_equal_counting_each_texts_tokens() -> None:
    texts = [
        NOTES["kettle.md"],
        "",
        NOTES["garden/shed.md"],
        "Café CAFÉ cafe — naïve planned plans",
        "x" * 70,
    ]
    got = termstats.counts(texts)
    assert got == [Counter(termstats.tokens(t)) for t in texts]
    assert got[3]["cafe"] == 3 and got[3]["plan"] == 2
    assert termstats.counts(texts[:1]) == got[:1]  # nothing kept from the call before


def test_the_heading_that_is_the_title_is_counted_once_as_the_title(
    server: Server, vault: Path
) -> None:
    """The title column holds a note's title; the headings column the other headings (a
    title counted again as a heading outweighed the body: CISI, docs/search.md)."""
    (vault / "h1.md").write_text("# Copper kettle\n\n## Lid\n\nboils\n", encoding="utf-8")
    (vault / "front.md").write_text(
        "---\ntitle: Spout\n---\n# Copper kettle\n\n## Spout\n\nboils\n", encoding="utf-8"
    )
    index = indexed(server, vault)
    index.query("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vi USING fts5vocab(main, fts, instance)")
    ids = {str(k): int(n) for n, k in index.query("SELECT id, key FROM notes")}

    def words(key: str, column: str) -> set[str]:
        rows = index.query("SELECT term FROM temp.vi WHERE doc = ? AND col = ?", (ids[key], column))
        return {str(r[0]) for r in rows}

    assert words("h1.md", "title") == {"copper", "kettl"}
    assert words("h1.md", "headings") == {"lid"}
    assert words("front.md", "title") == {"spout"}
    assert words("front.md", "headings") == {"copper", "kettl"}  # the H1 is not its title
    assert {"copper", "kettl", "lid"} <= words("h1.md", "body")  # the text itself, whole
