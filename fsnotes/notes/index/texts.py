"""A note's text where search needs it, read from the note's file: the index keeps none.

The FTS5 tables hold each note's words, their places and each column's length, not its text
(contentless, see :mod:`fsnotes.notes.index.schema`). Two things need the text itself:

* the excerpt of each hit shown (:func:`snippets`): FTS5's ``snippet()`` needs a table with
  content, so the hits' bodies go into a small in-memory FTS5 table of this thread, with the
  index's tokenizer, and ``snippet()`` runs there over the same words: the excerpt is the one
  FTS5 would make over the index, of the text the file holds now;
* the pseudo-relevance feedback of a question (:func:`feedback_text`), which reads the words
  of its few best notes.

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
from fsnotes.notes.text.markdown import split_frontmatter
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
    """What the index made of a note's text: the body (after the frontmatter) and the line
    it starts on, and the frontmatter's values as the ``front`` column holds them."""

    body: str
    body_start: int
    front: str


def of(text: str) -> NoteText:
    frontmatter, body, body_start = split_frontmatter(text)
    return NoteText(body=body, body_start=body_start, front=front_text(frontmatter))


def feedback_text(title: str, tags_json: str, text: NoteText) -> str:
    """The words feedback learns from: title, tags, frontmatter values and body (its first
    FEEDBACK_CHARS), the text columns a note is about (not the made-up path and scope
    words)."""
    tags = " ".join(str(t) for t in json.loads(tags_json))
    parts = (title, tags, text.front, text.body)
    return "\n".join(p[:FEEDBACK_CHARS] for p in parts)


def _table() -> sqlite.Connection:
    conn: sqlite.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite.connect(":memory:", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE x USING fts5(body, every, tokenize='{TOKENIZER}')")
        _local.conn = conn
    return conn


def snippets(
    bodies: Mapping[int, str], match: str, marks: tuple[str, str, str], tokens: int
) -> dict[int, str]:
    """``snippet()`` of each body (by note id) for the MATCH expression ``match`` (the
    query's words, without column filters), marked with ``marks`` (open, close, ellipsis),
    at most ``tokens`` words."""
    if not bodies:
        return {}
    conn = _table()
    conn.execute("DELETE FROM x")
    try:
        conn.executemany(
            "INSERT INTO x(rowid, body, every) VALUES (?, ?, ?)",
            [(note_id, body, _EVERY_ROW) for note_id, body in bodies.items()],
        )
        rows = conn.execute(
            "SELECT rowid, snippet(x, 0, ?, ?, ?, ?) FROM x WHERE x MATCH ?",
            (*marks, tokens, f'{{body}} : ({match}) OR {{every}} : "{_EVERY_ROW}"'),
        ).fetchall()
    finally:
        conn.execute("DELETE FROM x")  # the text is not kept past the call
    return {int(r[0]): str(r[1] or "") for r in rows}
