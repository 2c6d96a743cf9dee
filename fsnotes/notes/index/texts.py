"""A note's text where search needs it, read from the note's file: the index keeps none.

The FTS5 tables hold each note's words, their places and each column's length, not its text
(contentless, see :mod:`fsnotes.notes.index.schema`). Two things need the text itself:

* the excerpt of each hit shown (:func:`snippets`): FTS5's ``snippet()`` needs a table with
  content, so the hits' bodies go into a small in-memory FTS5 table of this thread, with the
  index's tokenizer, and ``snippet()`` runs there over the same words: the excerpt is the one
  FTS5 would make over the index, of the text the file holds now;
* the pseudo-relevance feedback of a question (:func:`feedback_text`), which reads the words
  of its few best notes.

Reading a hit's file and tokenizing its body (twice: into the small table, then for the
excerpt) costs more than reading a stored copy (once, after inflating it): about 0.3 ms
per hit of a few KiB at 100k notes (docs/search.md has the figures), the price of an index a
third the size.

The file is read through the workspace's ``Root`` by the caller's :data:`Reader` (the
catalog's), like every read of a note: a note that cannot be read now (gone, replaced by a
link, not UTF-8) has no text, and its hit no excerpt; the catalog checks every hit against
its file anyway and indexes a changed note again before answering.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fsnotes.notes.index.db import sqlite
from fsnotes.notes.index.schema import TOKENIZER, front_text
from fsnotes.notes.text.markdown import body_of, split_frontmatter
from sandbox.uri import Components

# A note's whole text as the index read it (strict UTF-8), or None when it cannot be read.
Reader = Callable[[Components], "str | None"]

# Characters of a note read for feedback: the start of a long note says what it is about,
# and tokenizing a whole 4 MiB note would cost more than the search.
FEEDBACK_CHARS = 20_000
# Always present in the in-memory table's second column, so that every body inserted has a
# row the MATCH returns (a hit matched by its title alone still gets the start of its body
# as its excerpt, as snippet() gives a column without matches). A private-use character:
# never a word of a query.
_EVERY_ROW = "\ue001"

_local = threading.local()


@dataclass(frozen=True)
class NoteText:
    """What an excerpt is made from: the body (after the frontmatter) as the index read
    it, and the line it starts on."""

    body: str
    body_start: int


def of(text: str) -> NoteText:
    body, body_start = body_of(text)
    return NoteText(body=body, body_start=body_start)


def feedback_text(title: str, tags_json: str, text: str) -> str:
    """The words feedback learns from, of a note's whole ``text``: title, tags,
    frontmatter values and body (each its first FEEDBACK_CHARS), the text columns a note is
    about (not the made-up path and scope words)."""
    frontmatter, body, _start = split_frontmatter(text)
    tags = " ".join(str(t) for t in json.loads(tags_json))
    parts = (title, tags, front_text(frontmatter), body)
    return "\n".join(p[:FEEDBACK_CHARS] for p in parts)


def _table() -> sqlite.Connection:
    """This thread's in-memory excerpt table: an external-content FTS5 table over ``src``,
    so that emptying it ('delete-all') does not tokenize its rows again, as a DELETE from a
    table with its own content does."""
    conn: sqlite.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite.connect(":memory:", isolation_level=None)
        conn.execute("CREATE TABLE src(id INTEGER PRIMARY KEY, body TEXT, every TEXT)")
        conn.execute(
            "CREATE VIRTUAL TABLE x USING fts5(body, every, content='src', "
            f"content_rowid='id', tokenize='{TOKENIZER}')"
        )
        _local.conn = conn
    return conn


def snippets(
    bodies: Mapping[int, str], match: str, marks: tuple[str, str, str], tokens: int
) -> dict[int, str]:
    """``snippet()`` of each body (by note id) for the MATCH expression ``match`` (the
    query's words, without column filters), marked with ``marks`` (open, close, ellipsis),
    at most ``tokens`` words. Each body is tokenized twice (indexed, then excerpted); the
    text is let go before returning."""
    if not bodies:
        return {}
    conn = _table()
    try:
        conn.executemany(
            "INSERT INTO src(id, body, every) VALUES (?, ?, ?)",
            [(note_id, body, _EVERY_ROW) for note_id, body in bodies.items()],
        )
        conn.execute("INSERT INTO x(x) VALUES ('rebuild')")
        rows = conn.execute(
            "SELECT rowid, snippet(x, 0, ?, ?, ?, ?) FROM x WHERE x MATCH ?",
            (*marks, tokens, f'{{body}} : ({match}) OR {{every}} : "{_EVERY_ROW}"'),
        ).fetchall()
    finally:
        conn.execute("INSERT INTO x(x) VALUES ('delete-all')")
        conn.execute("DELETE FROM src")
    return {int(r[0]): str(r[1] or "") for r in rows}
