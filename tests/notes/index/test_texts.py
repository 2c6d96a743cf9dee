"""Excerpts made from the note's file (fsnotes/notes/index/texts.py) are the excerpts FTS5
makes over an index that keeps the text: ``snippet()`` of the same body, the same query
words, the same marks, whether the note matched in its body or only in another column (its
title), for words, phrases and prefixes; and the body they are made from is the one
``split_frontmatter`` gives, without parsing the frontmatter."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from fsnotes.notes.index import ranking, texts
from fsnotes.notes.index.db import sqlite
from fsnotes.notes.index.schema import TOKENIZER
from fsnotes.notes.text.markdown import split_frontmatter
from fsnotes.notes.text.query import parse, to_match

WORDS = ("copper", "kettle", "Kettles", "boiling", "café", "the", "a", "roof", "über", "plan")
word = st.sampled_from(WORDS)
line = st.lists(word, min_size=0, max_size=40).map(" ".join)
body = st.lists(line, min_size=1, max_size=6).map("\n".join)
query = st.sampled_from(
    ["kettle", "copper kettle", '"copper kettle"', "kett*", "cafe", "the roof", "zebra", "boil*"]
)


def _stored_snippets(rows: dict[int, tuple[str, str]], match: str) -> dict[int, str]:
    """What the index did when it kept the text: snippet() over a table with content, the
    query over every column, the excerpt of the body."""
    conn = sqlite.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE f USING fts5(body, title, tokenize='{TOKENIZER}')")
    conn.executemany(
        "INSERT INTO f(rowid, body, title) VALUES (?, ?, ?)",
        [(n, b, t) for n, (b, t) in rows.items()],
    )
    found = conn.execute(
        "SELECT rowid, snippet(f, 0, ?, ?, ?, ?) FROM f WHERE f MATCH ?",
        (*ranking.INTERNAL_MARKS, ranking.SNIPPET_TOKENS, match),
    ).fetchall()
    return {int(n): str(s) for n, s in found}


@settings(max_examples=200, deadline=None)
@given(bodies=st.lists(body, min_size=1, max_size=5), q=query)
def test_excerpts_from_files_equal_fts5_snippets_over_the_stored_text(
    bodies: list[str], q: str
) -> None:
    match = to_match(parse(q), op="OR")
    # Every note's title holds the query's words: a note whose body lacks them matched by its
    # title alone (as every hit matched somewhere), and still has an excerpt (its body's start).
    title = q.replace('"', "").replace("*", "")
    rows = {n: (b, title) for n, b in enumerate(bodies, 1)}
    want = _stored_snippets(rows, match)
    got = texts.snippets(
        {n: b for n, (b, _t) in rows.items()},
        match,
        ranking.INTERNAL_MARKS,
        ranking.SNIPPET_TOKENS,
    )
    assert got == want


def test_the_excerpt_table_keeps_no_text_past_the_call() -> None:
    texts.snippets({1: "copper kettle"}, '"kettle"', ranking.INTERNAL_MARKS, 8)
    conn = texts._table()
    assert conn.execute("SELECT count(*) FROM src").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM x WHERE x MATCH 'kettle'").fetchone() == (0,)


frontmatter = st.lists(
    st.tuples(st.sampled_from(["title", "tags", "k"]), st.text(string.ascii_letters, max_size=8)),
    max_size=4,
).map(lambda kv: "".join(f"{k}: {v}\n" for k, v in kv))
note = st.one_of(
    body,
    st.tuples(frontmatter, body).map(lambda fb: f"---\n{fb[0]}---\n{fb[1]}"),
    st.tuples(frontmatter, body).map(lambda fb: f"---\r\n{fb[0]}...\r\n{fb[1]}"),
    st.tuples(frontmatter, body).map(lambda fb: f"---\n{fb[0]}{fb[1]}"),  # never closed
)


@settings(max_examples=300, deadline=None)
@given(text=note)
def test_the_excerpts_body_is_the_body_the_index_read(text: str) -> None:
    _front, want_body, want_start = split_frontmatter(text)
    got = texts.of(text)
    assert (got.body, got.body_start) == (want_body, want_start)
