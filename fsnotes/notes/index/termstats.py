"""The per-term statistics the ranking (fsnotes/notes/index/ranking.py) scores from, read
out of the FTS5 index: a term's frequency in each text column of each note, each note's
column lengths, the index's average column lengths, and the tokens of a text.

FTS5's own ``bm25()`` cannot score a field-weighted BM25 (BM25F): it adds the weighted hits
of all columns and normalises them by the note's whole length, so a title counts for little
beside a long body, and its k1 and b are fixed. So the statistics are read here and scored
in Python:

* term frequencies from an ``fts5vocab`` table of type ``instance`` (one row per
  occurrence: note, column, offset; created once per connection in its in-memory ``temp``
  schema), looked up by term, which FTS5 answers from the term's own doclist: the cost is
  that term's occurrences in the whole index, as ``bm25()``'s is (the caller bounds it by
  the terms' note counts);
* column lengths from FTS5's ``fts_docsize`` table and the averages from the record FTS5
  keeps at ``fts_data`` id 1 (the number of rows, then the tokens of each column, as
  SQLite varints: FTS5's file format, stable since 3.9), so no per-query work scales with
  the vault;
* tokens from the index's own tokenizer over a private in-memory FTS5 table (one per
  thread), so that a query word is looked up by the stem the index holds;
* the words of a note (for feedback) from its file (the index keeps no text, see
  :mod:`fsnotes.notes.index.texts`).
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Iterable, Sequence

from fsnotes.notes.index import texts as notetexts
from fsnotes.notes.index.db import sqlite
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import FTS_COLUMNS, TEXT_COLUMNS, TOKENIZER, parts_of
from fsnotes.notes.index.texts import Reader

COLUMN_AT = {name: i for i, name in enumerate(TEXT_COLUMNS)}
_INSTANCE = "temp.fts_instance"
# Notes per IN-list when reading lengths (SQLite's bound on parameters is far above it;
# a list this long is one statement per few hundred notes).
_IDS_PER_STATEMENT = 500
# Words per statement when reading several words' rows at once (a query holds at most a few
# hundred words; SQLite's bound on parameters is 32,766).
_WORDS_PER_STATEMENT = 500

Freqs = list[tuple[int, int, int]]  # (note id, text column index, occurrences)


def _ensure_vocab(index: NoteIndex) -> None:
    index.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {_INSTANCE} USING fts5vocab(main, fts, instance)"
    )


_local = threading.local()


def tokens(text: str) -> list[str]:
    """The tokens the index's tokenizer makes of ``text``, in order (case folded,
    diacritics removed, stemmed)."""
    if len(text) <= _CACHED_CHARS:
        return list(_short_tokens(text))
    return _tokenize(text)


# A query's words and the feedback's candidate words recur from question to question: their
# tokens are remembered (a tokenizer round trip costs about 0.1 ms).
_CACHED_CHARS = 64


@functools.lru_cache(maxsize=8192)
def _short_tokens(text: str) -> tuple[str, ...]:
    return tuple(_tokenize(text))


def _tokenizer() -> sqlite.Connection:
    """This thread's in-memory tokenizer: a contentless FTS5 table (emptied by 'delete-all',
    which unlike a DELETE from a table with content does not tokenize its rows again) and
    its ``instance`` vocabulary."""
    conn: sqlite.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite.connect(":memory:", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, content='', tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE tv USING fts5vocab(t, instance)")
        _local.conn = conn
    return conn


def _tokenize(text: str) -> list[str]:
    conn = _tokenizer()
    conn.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (text,))
    try:
        return [str(r[0]) for r in conn.execute("SELECT term FROM tv ORDER BY offset")]
    finally:
        conn.execute("INSERT INTO t(t) VALUES ('delete-all')")


def counts(texts: Sequence[str]) -> list[Counter[str]]:
    """How many times each token of the index's tokenizer is in each of ``texts``, in one
    round trip: the (text, token) rows fetched at once and counted by ``Counter`` in C
    (SQLite's GROUP BY over the vocabulary sorts them first: 4.6 ms against 2.0 to 3.6 in
    two runs, for a question's five feedback notes at 100k)."""
    if not texts:
        return []
    conn = _tokenizer()
    conn.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", list(enumerate(texts)))
    try:
        pairs: list[tuple[int, str]] = conn.execute("SELECT doc, term FROM tv").fetchall()
    finally:
        conn.execute("INSERT INTO t(t) VALUES ('delete-all')")
    out: list[Counter[str]] = [Counter() for _ in texts]
    for (doc, term), n in Counter(pairs).items():
        out[doc][term] = n
    return out


def _rows(
    index: NoteIndex, token: str, prefix: bool, grouped: bool, among: Sequence[int] = ()
) -> list[tuple[int, int, int]]:
    """(note, text column index, count) per note and column (``grouped``), or (note, text
    column index, offset) per occurrence, of the token (or tokens starting with it), in the
    notes ``among`` if given (filtered inside SQLite). The scope column is left out."""
    where = "term >= ? AND term < ?" if prefix else "term = ?"
    params: list[object] = [token, token + "\U0010ffff"] if prefix else [token]
    if among:
        where += f" AND doc IN ({', '.join('?' * len(among))})"
        params.extend(among)
    what = "doc, col, count(*)" if grouped else "doc, col, offset"
    tail = " GROUP BY doc, col" if grouped else ""
    out: list[tuple[int, int, int]] = []
    for doc, col, value in index.query(
        f"SELECT {what} FROM {_INSTANCE} WHERE {where}{tail}", params
    ):
        at = COLUMN_AT.get(col)
        if at is not None:
            out.append((int(doc), at, int(value)))
    return out


def frequencies(
    index: NoteIndex, expr: str, words: Sequence[str], prefix: bool, within: set[int]
) -> Freqs:
    """(note, text column index, count) of a term (its MATCH expression ``expr``, its
    tokens ``words``; the last a prefix when ``prefix``) in the notes of ``within``. A
    phrase counts once per column it is in: its words' occurrences are not bounded by the
    phrase's notes (``of the``), so it is matched per column by FTS5 instead, which reads
    only the notes holding the whole phrase."""
    if not words:
        return []
    if len(words) == 1:
        _ensure_vocab(index)
        among = sorted(within) if len(within) <= _IDS_PER_STATEMENT else []
        return [r for r in _rows(index, words[0], prefix, True, among) if r[0] in within]
    out: Freqs = []
    for at, column in enumerate(TEXT_COLUMNS):
        for (doc,) in index.query(
            "SELECT rowid FROM fts WHERE fts MATCH ?", (f"{{{column}}} : ({expr})",)
        ):
            if int(doc) in within:
                out.append((int(doc), at, 1))
    return out


def word_frequencies(index: NoteIndex, words: Sequence[str], within: set[int]) -> dict[str, Freqs]:
    """:func:`frequencies` of each of these tokens (plain words: neither phrases nor
    prefixes) in the notes of ``within``, read in one statement per
    :data:`_WORDS_PER_STATEMENT` words: the cost is still each word's occurrences in the
    whole index, without a statement's own cost (its parameters, the IN lists) per word."""
    wanted = sorted(set(words))
    if not wanted or not within:
        return {}
    _ensure_vocab(index)
    among = sorted(within) if len(within) <= _IDS_PER_STATEMENT else []
    out: dict[str, Freqs] = {}
    for start in range(0, len(wanted), _WORDS_PER_STATEMENT):
        part = wanted[start : start + _WORDS_PER_STATEMENT]
        where = f"term IN ({', '.join('?' * len(part))})"
        if among:
            where += f" AND doc IN ({', '.join('?' * len(among))})"
        for term, doc, col, count in index.query(
            f"SELECT term, doc, col, count(*) FROM {_INSTANCE} WHERE {where} "
            "GROUP BY term, doc, col",
            [*part, *among],
        ):
            at = COLUMN_AT.get(col)
            if at is not None and int(doc) in within:
                out.setdefault(str(term), []).append((int(doc), at, int(count)))
    return out


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (big-endian 7-bit groups, the high bit set on all but the last
    byte) of ``blob``. (A ninth byte of 8 bits would need a value over 2**56 tokens.)"""
    if blob.isascii():  # every value below 128: one byte each
        return list(blob)
    out: list[int] = []
    value = 0
    for byte in blob:
        if byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value = 0
    return out


_TEXT_AT = [FTS_COLUMNS.index(c) for c in TEXT_COLUMNS]


def lengths(index: NoteIndex, ids: Iterable[int]) -> dict[int, tuple[int, ...]]:
    """Tokens in each text column of each of these notes."""
    wanted = sorted(set(ids))
    out: dict[int, tuple[int, ...]] = {}
    for start in range(0, len(wanted), _IDS_PER_STATEMENT):
        part = wanted[start : start + _IDS_PER_STATEMENT]
        marks = ", ".join("?" * len(part))
        for note_id, size in index.query(
            f"SELECT id, sz FROM fts_docsize WHERE id IN ({marks})", part
        ):
            sizes = _varints(bytes(size))
            out[int(note_id)] = tuple(sizes[i] if i < len(sizes) else 0 for i in _TEXT_AT)
    return out


def averages(index: NoteIndex) -> tuple[int, tuple[float, ...]]:
    """(notes, average tokens of each text column) over the whole index."""
    rows = index.query("SELECT block FROM fts_data WHERE id = 1")
    values = _varints(bytes(rows[0][0])) if rows and rows[0][0] is not None else []
    notes = values[0] if values else 0
    totals = values[1:]
    avg = tuple((totals[i] / notes if notes and i < len(totals) else 0.0) for i in _TEXT_AT)
    return notes, avg


def texts(index: NoteIndex, ids: Sequence[int], read: Reader) -> dict[int, Counter[str]]:
    """The tokens of these notes' text columns (their first FEEDBACK_CHARS each), read from
    their files by ``read`` (the index keeps no text); a note that cannot be read is left
    out."""
    out: dict[int, Counter[str]] = {}
    if not ids:
        return out
    marks = ", ".join("?" * len(ids))
    read_ids: list[int] = []
    read_texts: list[str] = []
    for note_id, key, title, tags in index.query(
        f"SELECT id, key, title, tags FROM notes WHERE id IN ({marks})", list(ids)
    ):
        text = read(parts_of(key))
        if text is not None:
            read_ids.append(int(note_id))
            read_texts.append(notetexts.feedback_text(title, tags, text))
    return dict(zip(read_ids, counts(read_texts), strict=True))


def held(index: NoteIndex, word: str, notes: int) -> int | None:
    """How many notes hold the token ``word``, or None when more than ``notes`` do, none
    does, or it cannot be counted cheaply. It is counted by an FTS5 match of the word, which
    reads at most ``notes`` + 1 rowids (a quarter of a microsecond each): so only a token the
    tokenizer maps to itself (most stems; "relev" stays "relev") is looked at, the others
    skipped. Its rows are then read with other such words by :func:`word_frequencies`.
    The count is remembered while the index is unchanged (:mod:`fsnotes.notes.index.counts`)."""
    if tokens(word) != [word]:
        return None
    # Remembered until the index changes, like the plan's counts: a note's likeliest words
    # recur as candidates from question to question.
    count = index.count_matches('"' + word.replace('"', '""') + '"', notes + 1)
    return None if count > notes or not count else count
